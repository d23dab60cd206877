/*
 * vforksock - makes a TCP socket (the shim loads its core), then a TCP
 * socket in a vfork child before it exits: the interposer's own fallback
 * (vfork-child, 72), counted in the parent's table (the child shares its
 * memory). Prints "ready" and lives 10 s for the stats to be read.
 */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0) {
		perror("socket");
		return 1;
	}
	pid_t pid = vfork();
	if (pid == 0) {
		socket(AF_INET, SOCK_STREAM, 0);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, NULL, 0) != pid) {
		perror("vfork");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	sleep(10);
	return 0;
}
