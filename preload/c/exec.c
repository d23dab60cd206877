/*
 * exec.c - execve and the exec family: sockets the new program inherits
 * keep their CANDIDATE state across the exec.
 *
 * A connection accepted on a group listener is decided by the process that
 * first uses it (deferred acceptance, shim/deferred_accept.go); until then
 * its fd is CANDIDATE. A fork child that execs a server program for it
 * (inetd style) starts a fresh interposer whose fd table is empty: the new
 * program's reads would go straight to the kernel and nobody would claim
 * the connection, so its client would wait out the deferral deadline and
 * fall back. So exec passes the CANDIDATE fds that survive it (no
 * FD_CLOEXEC) in SDPSHIM__INHERITED_FDS ("3,7"; two underscores: a
 * private name, which the core's configuration ignores), added to the new
 * program's environment; the new interposer's constructor marks those that
 * are TCP sockets CANDIDATE again and removes the variable, so neither the
 * program nor its own children see it. The core adopts them on first use
 * (a listener becomes a group listener, a deferred connection is claimed,
 * anything else goes UNMANAGED).
 *
 * Nothing is allocated: the new environment is built on the stack (a
 * vfork child may exec here, in its parent's memory). An exec that fails
 * returns as before; the caller's environment is never modified.
 */
#include "shim.h"

#include <alloca.h>
#include <fcntl.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SDP_INHERIT_VAR "SDPSHIM__INHERITED_FDS"
/* At most this many fds are passed (the variable's length stays small). */
#define SDP_INHERIT_MAX 64

extern char **environ;

/* Appends the decimal digits of v (>= 0) to buf at *len if they fit in n
 * (no printf: this may run in a vfork child). */
static int sdp_put_int(char *buf, size_t n, size_t *len, int v)
{
	char d[12];
	int k = 0;
	do {
		d[k++] = (char)('0' + v % 10);
		v /= 10;
	} while (v > 0);
	if (*len + (size_t)k + 1 >= n)
		return 0;
	while (k > 0)
		buf[(*len)++] = d[--k];
	buf[*len] = 0;
	return 1;
}

/* Writes "SDPSHIM__INHERITED_FDS=3,7" into buf (size n) for the CANDIDATE,
 * unseen and deferred fds an exec keeps; 0 when there are none. */
static int sdp_inherit_var(char *buf, size_t n)
{
	int hi = __atomic_load_n(&sdp_fd_hi, __ATOMIC_RELAXED);
	static const char name[] = SDP_INHERIT_VAR "=";
	if (n <= sizeof name)
		return 0;
	memcpy(buf, name, sizeof name);
	size_t len = sizeof name - 1, start = len;
	int count = 0;
	for (int fd = 0; fd <= hi && count < SDP_INHERIT_MAX; fd++) {
		int st = sdp_fd_state_raw(fd); /* an inherited fd's exec is not a use */
		if (st != SDPSHIM_FD_CANDIDATE && st != SDP_FD_UNSEEN && st != SDP_FD_ADOPTING && st != SDP_FD_DEFERRED)
			continue;
		int fl = sdp_real.fcntl(fd, F_GETFD);
		if (fl < 0 || (fl & FD_CLOEXEC))
			continue;
		size_t before = len;
		if (count > 0) {
			if (len + 1 >= n)
				break;
			buf[len++] = ',';
		}
		if (!sdp_put_int(buf, n, &len, fd)) {
			len = before;
			buf[len] = 0;
			break;
		}
		count++;
	}
	return len > start;
}

/* envp with var added (and an older value of it dropped), in out, which
 * has room for every entry of envp plus two. */
static char *const *sdp_env_with(char *const envp[], char *var, char **out)
{
	size_t k = 0;
	size_t name = sizeof SDP_INHERIT_VAR; /* "NAME=" */
	for (size_t i = 0; envp != NULL && envp[i] != NULL; i++)
		if (strncmp(envp[i], SDP_INHERIT_VAR "=", name) != 0)
			out[k++] = envp[i];
	out[k++] = var;
	out[k] = NULL;
	return out;
}

static size_t sdp_env_count(char *const envp[])
{
	size_t n = 0;
	while (envp != NULL && envp[n] != NULL)
		n++;
	return n;
}

/* Calls exec with envp, or with envp plus the variable when there are
 * CANDIDATE fds to pass (a macro: the array lives in the caller's frame). */
#define SDP_EXEC_WITH_INHERITED(envp, call)                                                     \
	do {                                                                                        \
		char var_[sizeof SDP_INHERIT_VAR + 1 + SDP_INHERIT_MAX * 8];                       \
		char *const *env_ = (envp);                                                        \
		if (sdp_fd_hi >= 0 && sdp_inherit_var(var_, sizeof var_)) {                       \
			char **out_ = alloca((sdp_env_count(envp) + 2) * sizeof(char *));          \
			env_ = sdp_env_with((envp), var_, out_);                                   \
		}                                                                                  \
		return (call);                                                                     \
	} while (0)

typedef int execve_fn(const char *, char *const[], char *const[]);
typedef int fexecve_fn(int, char *const[], char *const[]);

/* libc's, resolved by the constructor (sdp_exec_init): a vfork child may
 * exec, and must not resolve anything then. */
static execve_fn *sdp_real_execve, *sdp_real_execvpe;
static fexecve_fn *sdp_real_fexecve;

static int sdp_execve(const char *path, char *const argv[], char *const envp[])
{
	if (sdp_real_execve == NULL)
		return (int)sdp_fail(ENOSYS);
	SDP_EXEC_WITH_INHERITED(envp, sdp_real_execve(path, argv, env_));
}

static int sdp_execvpe(const char *file, char *const argv[], char *const envp[])
{
	if (sdp_real_execvpe == NULL)
		return (int)sdp_fail(ENOSYS);
	SDP_EXEC_WITH_INHERITED(envp, sdp_real_execvpe(file, argv, env_));
}

SDP_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	return sdp_execve(path, argv, envp);
}

SDP_EXPORT int execv(const char *path, char *const argv[]) { return sdp_execve(path, argv, environ); }

SDP_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	return sdp_execvpe(file, argv, envp);
}

SDP_EXPORT int execvp(const char *file, char *const argv[]) { return sdp_execvpe(file, argv, environ); }

SDP_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	if (sdp_real_fexecve == NULL)
		return (int)sdp_fail(ENOSYS);
	SDP_EXEC_WITH_INHERITED(envp, sdp_real_fexecve(fd, argv, env_));
}

/* execl, execle, execlp: the arguments into an array on the stack. */
#define SDP_EXECL_ARGV(arg0, ap, argv)                                                          \
	size_t argc_ = 1;                                                                           \
	va_start(ap, arg0);                                                                         \
	while (va_arg(ap, char *) != NULL)                                                          \
		argc_++;                                                                            \
	va_end(ap);                                                                                 \
	char **argv = alloca((argc_ + 1) * sizeof(char *));                                         \
	va_start(ap, arg0);                                                                         \
	argv[0] = (char *)(arg0);                                                                   \
	for (size_t i_ = 1; i_ <= argc_; i_++)                                                      \
		argv[i_] = va_arg(ap, char *);

SDP_EXPORT int execl(const char *path, const char *arg0, ...)
{
	va_list ap;
	SDP_EXECL_ARGV(arg0, ap, argv);
	va_end(ap);
	return sdp_execve(path, argv, environ);
}

SDP_EXPORT int execlp(const char *file, const char *arg0, ...)
{
	va_list ap;
	SDP_EXECL_ARGV(arg0, ap, argv);
	va_end(ap);
	return sdp_execvpe(file, argv, environ);
}

SDP_EXPORT int execle(const char *path, const char *arg0, ...)
{
	va_list ap;
	SDP_EXECL_ARGV(arg0, ap, argv);
	char *const *envp = va_arg(ap, char *const *);
	va_end(ap);
	return sdp_execve(path, argv, envp);
}

/* The constructor: libc's exec functions; then the fds the variable names
 * that are TCP sockets become CANDIDATE, and the variable goes. */
void sdp_exec_init(void)
{
	sdp_real_execve = (execve_fn *)dlsym(RTLD_NEXT, "execve");
	sdp_real_execvpe = (execve_fn *)dlsym(RTLD_NEXT, "execvpe");
	sdp_real_fexecve = (fexecve_fn *)dlsym(RTLD_NEXT, "fexecve");
	const char *v = getenv(SDP_INHERIT_VAR);
	if (v == NULL)
		return;
	for (const char *p = v; *p != 0;) {
		char *end;
		long fd = strtol(p, &end, 10);
		if (end == p || fd < 0 || fd > INT32_MAX)
			break;
		int domain = 0, type = 0, proto = 0;
		socklen_t l = sizeof domain;
		if (sdp_real.getsockopt((int)fd, SOL_SOCKET, SO_DOMAIN, &domain, &l) == 0 &&
		    (l = sizeof type, sdp_real.getsockopt((int)fd, SOL_SOCKET, SO_TYPE, &type, &l)) == 0 &&
		    (l = sizeof proto, sdp_real.getsockopt((int)fd, SOL_SOCKET, SO_PROTOCOL, &proto, &l)) == 0 &&
		    (domain == AF_INET || domain == AF_INET6) && type == SOCK_STREAM && proto == IPPROTO_TCP) {
			/* A connection is adopted, and claimed, at its first use. */
			struct sockaddr_storage ss;
			socklen_t sl = sizeof ss;
			int conn = sdp_real.getpeername((int)fd, (struct sockaddr *)&ss, &sl) == 0;
			sdp_fd_set((int)fd, conn ? SDP_FD_DEFERRED : SDPSHIM_FD_CANDIDATE);
			if (conn)
				__atomic_store_n(&sdp_deferred_hint, 1, __ATOMIC_RELAXED);
		}
		p = *end == ',' ? end + 1 : end;
		if (*end != ',')
			break;
	}
	unsetenv(SDP_INHERIT_VAR);
}
