/* ctormain.c - prints what ctorlib's constructor achieved, then uses TCP
 * itself once the interposer is fully initialised. */
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

extern const char *ctorlib_result;

int main(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return 1;
	close(fd);
	printf("ctor %s\n", ctorlib_result);
	return 0;
}
