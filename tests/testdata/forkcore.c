/*
 * forkcore.c - fork children that run their own copy of the core
 * (tests/preload_forkcore_test.go). Every exchange connects to an echo
 * server on 127.0.0.1:PORT, writes BYTES pseudo-random bytes in 64 KiB
 * rounds, reads each round back and checks it byte for byte.
 *
 *   forkcore PORT gens DEPTH BYTES
 *       The process exchanges on connection A (its core loads), forks a
 *       child, then exchanges again on A (switched to kernel TCP at the
 *       fork) and on a new connection. The child does the same one level
 *       down, DEPTH generations deep. Each process prints "gen G PID ok".
 *       Connections: 2 * (DEPTH + 1).
 *   forkcore PORT seq N BYTES
 *       Exchanges once, then forks N children one after the other, each
 *       exchanging on a new connection ("child PID ok"); then prints
 *       "memfds K": its fds that are the core copy memfd. Connections: N + 1.
 *   forkcore PORT signals BYTES
 *       Installs a SIGUSR1 handler, exchanges, forks a child that raises
 *       SIGUSR1 (the handler must run; the signals the Go runtime took
 *       must have their default action back), exchanges on a new connection
 *       ("child PID ok"), raises SIGUSR1 again, then forks a grandchild
 *       that writes to a pipe nobody reads: it must die of SIGPIPE. The
 *       parent also forks a second child that never makes a socket and
 *       does the same pipe write. Connections: 2.
 *   forkcore PORT evict BYTES
 *       Exchanges, forks a child that exchanges and one that exits (the
 *       second fork makes the core copy), then meets the copy's fd:
 *       close() fails (EBADF), dup2() onto it succeeds (the copy moves);
 *       a third child exchanges; prints "memfds K".
 *       Connections: 3.
 *   forkcore PORT sigmask BYTES
 *       Installs a SIGCHLD handler, blocks every signal, exchanges (its
 *       core loads): the mask must be unchanged; 20 children exit while
 *       SIGCHLD is blocked: the handler must not run (on any thread);
 *       unblocked, it runs on the main thread. A fork child then
 *       exchanges with every signal blocked (its copy loads): its mask
 *       must be unchanged too. Connections: 2.
 *   forkcore PORT handlerfork BYTES
 *       Installs a SIGUSR2 handler (before the core loads: the Go runtime
 *       then adds SA_ONSTACK to it and gives this thread a signal stack of
 *       its own), exchanges, and raises SIGUSR2: the handler forks on that
 *       signal stack, and the child, still in the handler, must run
 *       ("child PID ok"). A second child, forked outside any handler,
 *       raises SIGUSR2 (its handler must run: on the signal stack if it is
 *       there, else on the thread's stack) and exchanges on a new
 *       connection ("child PID ok"). Connections: 2.
 *   forkcore PORT daemon BYTES
 *       Exchanges (its core loads), then calls daemon(), whose fork is
 *       libc's own, not the interposed fork(): the daemon goes on as the
 *       process and exchanges on a new connection ("child PID ok").
 *       Connections: 2.
 *   forkcore PORT noenable BYTES
 *       Exchanges, forks a child that sets SDPSHIM_ENABLE=0 before its
 *       first socket and exchanges ("child PID ok"). Connections: 2.
 * Exit status 0 when every check passed; diagnostics on stderr.
 */
#define _GNU_SOURCE 1
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define die(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "forkcore[%d]: ", getpid());                                       \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fprintf(stderr, " (errno %d %s)\n", errno, strerror(errno));                       \
		exit(2);                                                                           \
	} while (0)

static int port;
static long nbytes;

static unsigned char byte_at(uint64_t seed, uint64_t i)
{
	uint64_t x = (i / 8 + 1) * 0x9E3779B97F4A7C15ULL ^ seed;
	x ^= x >> 31;
	x *= 0xBF58476D1CE4E5B9ULL;
	x ^= x >> 29;
	return (unsigned char)(x >> (8 * (i % 8)));
}

static int dial(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket");
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		die("connect");
	return fd;
}

/* nbytes through fd and back, checked. */
static void exchange(int fd, uint64_t seed)
{
	static unsigned char out[65536], in[65536];
	for (long done = 0; done < nbytes;) {
		size_t n = nbytes - done < (long)sizeof out ? (size_t)(nbytes - done) : sizeof out;
		for (size_t i = 0; i < n; i++)
			out[i] = byte_at(seed, (uint64_t)done + i);
		for (size_t off = 0; off < n;) {
			ssize_t w = write(fd, out + off, n - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				die("write");
			off += (size_t)w;
		}
		for (size_t off = 0; off < n;) {
			ssize_t r = read(fd, in + off, n - off);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				die("read: %zd at %ld (exchange %llu)", r, done + (long)off, (unsigned long long)seed);
			off += (size_t)r;
		}
		if (memcmp(in, out, n) != 0)
			die("echo differs in bytes %ld..%ld", done, done + (long)n);
		done += (long)n;
	}
}

static void one_connection(uint64_t seed)
{
	int fd = dial();
	exchange(fd, seed);
	close(fd);
}

/* 0 when pid exited 0 (diagnostic otherwise). */
static int reap(pid_t pid, const char *who)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			die("waitpid");
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	fprintf(stderr, "forkcore[%d]: %s %d: status 0x%x\n", getpid(), who, pid, st);
	return 1;
}

static int gens(int gen, int depth, int a)
{
	int bad = 0;
	exchange(a, 100 + (uint64_t)gen);
	if (gen < depth) {
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			close(a);
			int c = dial();
			_exit(gens(gen + 1, depth, c));
		}
		exchange(a, 200 + (uint64_t)gen); /* the parent's, now on kernel TCP */
		one_connection(300 + (uint64_t)gen);
		bad |= reap(pid, "child");
	} else {
		one_connection(300 + (uint64_t)gen);
	}
	close(a);
	printf("gen %d %d ok\n", gen, getpid());
	fflush(stdout);
	return bad;
}

static int core_memfds(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (d == NULL)
		die("opendir");
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		char path[300], target[256];
		snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
		ssize_t k = readlink(path, target, sizeof target - 1);
		if (k <= 0)
			continue;
		target[k] = 0;
		if (strstr(target, "memfd:sdpshim-core") != NULL)
			n++;
	}
	closedir(d);
	return n;
}

static int seq(int n)
{
	int bad = 0;
	one_connection(1);
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			one_connection(10 + (uint64_t)i);
			printf("child %d ok\n", getpid());
			fflush(stdout);
			_exit(0);
		}
		bad |= reap(pid, "child");
	}
	printf("memfds %d\n", core_memfds());
	fflush(stdout);
	return bad;
}

/* The fd of the core copy, -1 when there is none. */
static int core_memfd(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (d == NULL)
		die("opendir");
	int fd = -1;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		char path[300], target[256];
		snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
		ssize_t k = readlink(path, target, sizeof target - 1);
		if (k > 0) {
			target[k] = 0;
			if (strstr(target, "memfd:sdpshim-core") != NULL)
				fd = atoi(e->d_name);
		}
	}
	closedir(d);
	return fd;
}

static pid_t child_connection(uint64_t seed)
{
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		one_connection(seed);
		printf("child %d ok\n", getpid());
		fflush(stdout);
		_exit(0);
	}
	return pid;
}

/* The program meets the copy's fd number: close fails as on a number
 * not open, dup2 onto it succeeds (the copy moves away), and the next
 * child still runs its own core. */
static int evict(void)
{
	int bad = 0;
	one_connection(1);
	bad |= reap(child_connection(2), "child");
	/* The first fork made no copy (its child made its own): the second
	 * makes the one later children share. */
	pid_t idle = fork();
	if (idle == 0)
		_exit(0);
	if (idle < 0 || waitpid(idle, NULL, 0) < 0)
		die("second fork");
	int m = core_memfd();
	if (m < 0)
		die("no core copy after two forks");
	if (close(m) == 0 || errno != EBADF) {
		fprintf(stderr, "forkcore[%d]: close(%d) of the core copy: want EBADF\n", getpid(), m);
		bad = 1;
	}
	if (dup2(1, m) != m) {
		fprintf(stderr, "forkcore[%d]: dup2(1, %d): %s\n", getpid(), m, strerror(errno));
		bad = 1;
	}
	if (close(m) != 0) {
		fprintf(stderr, "forkcore[%d]: close(%d) after dup2: %s\n", getpid(), m, strerror(errno));
		bad = 1;
	}
	int m2 = core_memfd();
	if (m2 < 0 || m2 == m) {
		fprintf(stderr, "forkcore[%d]: core copy at %d after dup2 onto %d\n", getpid(), m2, m);
		bad = 1;
	}
	bad |= reap(child_connection(3), "child");
	printf("memfds %d\n", core_memfds());
	fflush(stdout);
	return bad;
}

static volatile sig_atomic_t usr1;
static void on_usr1(int sig)
{
	(void)sig;
	usr1++;
}

/* 0 when the signals the Go runtime handles have the default action
 * again (this program sets none of them) and SIGUSR1 has the program's
 * handler, as before the core loaded. */
static int pre_core_actions(const char *who)
{
	static const int sigs[] = {SIGPIPE, SIGSEGV, SIGBUS, SIGFPE, SIGURG};
	int bad = 0;
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		struct sigaction cur;
		if (sigaction(sigs[i], NULL, &cur) < 0)
			die("sigaction");
		if (cur.sa_handler != SIG_DFL) {
			fprintf(stderr, "forkcore[%d]: %s: signal %d has handler %p, want the default\n", getpid(),
				who, sigs[i], (void *)cur.sa_handler);
			bad = 1;
		}
	}
	struct sigaction cur;
	if (sigaction(SIGUSR1, NULL, &cur) < 0)
		die("sigaction");
	if (cur.sa_handler != on_usr1) {
		fprintf(stderr, "forkcore[%d]: %s: SIGUSR1 lost the program's handler\n", getpid(), who);
		bad = 1;
	}
	return bad;
}

/* Forks a process that writes to a pipe whose read end is closed: 0 when
 * it died of SIGPIPE (and had the pre-core signal actions). */
static int pipe_death(const char *who)
{
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		if (pre_core_actions(who))
			_exit(4);
		int p[2];
		if (pipe(p) < 0)
			die("pipe");
		close(p[0]);
		write(p[1], "x", 1);
		_exit(3); /* SIGPIPE did not kill it */
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			die("waitpid");
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGPIPE)
		return 0;
	fprintf(stderr, "forkcore[%d]: %s writing to a closed pipe: status 0x%x, not killed by SIGPIPE\n", getpid(),
		who, st);
	return 1;
}

static int signals(void)
{
	struct sigaction sa = {.sa_handler = on_usr1};
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) < 0)
		die("sigaction");
	int bad = 0;
	one_connection(1);
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		int cbad = pre_core_actions("child before its socket");
		raise(SIGUSR1);
		if (usr1 != 1) {
			fprintf(stderr, "forkcore[%d]: SIGUSR1 handler did not run before the socket\n", getpid());
			cbad = 1;
		}
		one_connection(2);
		raise(SIGUSR1);
		if (usr1 != 2) {
			fprintf(stderr, "forkcore[%d]: SIGUSR1 handler did not run after the socket\n", getpid());
			cbad = 1;
		}
		cbad |= pipe_death("grandchild (core copy loaded)");
		if (!cbad)
			printf("child %d ok\n", getpid());
		fflush(stdout);
		_exit(cbad);
	}
	bad |= reap(pid, "child");
	bad |= pipe_death("child without a socket");
	raise(SIGUSR1);
	if (usr1 != 1) {
		fprintf(stderr, "forkcore[%d]: SIGUSR1 handler did not run in the parent\n", getpid());
		bad = 1;
	}
	return bad;
}

static volatile sig_atomic_t chld_main, chld_other;
static pid_t main_tid;
static void on_chld(int sig)
{
	(void)sig;
	if (gettid() == main_tid)
		chld_main++;
	else
		chld_other++;
}

/* The program blocks every signal, then its first connection loads the
 * core: its mask must be unchanged. Its SIGCHLD handler must not run
 * while it blocks SIGCHLD (children exiting meanwhile), however many
 * threads the Go runtime has, then run on the main thread once it
 * unblocks it. */
static int masks(void)
{
	int bad = 0;
	main_tid = gettid();
	struct sigaction sa = {.sa_handler = on_chld, .sa_flags = SA_RESTART};
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGCHLD, &sa, NULL) < 0)
		die("sigaction");
	sigset_t all, cur;
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	one_connection(1);
	sigprocmask(SIG_BLOCK, NULL, &cur);
	static const int sigs[] = {SIGCHLD, SIGPROF, SIGURG, SIGSEGV, SIGBUS, SIGFPE, SIGTERM};
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		if (!sigismember(&cur, sigs[i])) {
			fprintf(stderr, "forkcore[%d]: signal %d unblocked by the core\n", getpid(), sigs[i]);
			bad = 1;
		}
	for (int i = 0; i < 20; i++) {
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0)
			_exit(0);
	}
	struct timespec ts = {0, 300 * 1000000L};
	nanosleep(&ts, NULL);
	if (chld_main + chld_other != 0) {
		fprintf(stderr, "forkcore[%d]: SIGCHLD handled %d times (%d off the main thread) while blocked\n", getpid(),
			chld_main + chld_other, chld_other);
		bad = 1;
	}
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_UNBLOCK, &chld, NULL);
	nanosleep(&ts, NULL);
	if (chld_main == 0 || chld_other != 0) {
		fprintf(stderr, "forkcore[%d]: after unblocking: SIGCHLD on the main thread %d times, elsewhere %d\n",
			getpid(), chld_main, chld_other);
		bad = 1;
	}
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	/* A fork child's first connection loads its own copy: its mask too
	 * must stay as it was. */
	sigprocmask(SIG_SETMASK, &all, NULL);
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		one_connection(2);
		sigprocmask(SIG_BLOCK, NULL, &cur);
		for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
			if (!sigismember(&cur, sigs[i])) {
				fprintf(stderr, "forkcore[%d]: child: signal %d unblocked by its core\n", getpid(), sigs[i]);
				_exit(1);
			}
		_exit(0);
	}
	bad |= reap(pid, "child");
	if (!bad)
		printf("sigmask ok\n");
	return bad;
}

static int noenable(void)
{
	one_connection(1);
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		setenv("SDPSHIM_ENABLE", "0", 1);
		one_connection(2);
		printf("child %d ok\n", getpid());
		fflush(stdout);
		_exit(0);
	}
	return reap(pid, "child");
}

static volatile sig_atomic_t usr2, usr2_forks;
static volatile pid_t usr2_child = -1;

static void on_usr2(int sig)
{
	(void)sig;
	usr2++;
	if (!usr2_forks)
		return;
	pid_t pid = fork();
	if (pid == 0) {
		/* Still in the handler, on its stack. */
		char line[64];
		int n = snprintf(line, sizeof line, "child %d ok\n", (int)getpid());
		write(1, line, (size_t)n);
		_exit(0);
	}
	usr2_child = pid;
}

static int handlerfork(void)
{
	struct sigaction sa = {.sa_handler = on_usr2};
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR2, &sa, NULL) < 0)
		die("sigaction");
	one_connection(1);
	usr2_forks = 1;
	raise(SIGUSR2);
	usr2_forks = 0;
	if (usr2_child < 0)
		die("fork in the handler");
	int bad = reap(usr2_child, "child forked in a handler");
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		raise(SIGUSR2);
		if (usr2 != 2) {
			fprintf(stderr, "forkcore[%d]: SIGUSR2 handler ran %d times, want 2\n", getpid(), (int)usr2);
			_exit(2);
		}
		one_connection(2);
		printf("child %d ok\n", getpid());
		fflush(stdout);
		_exit(0);
	}
	return bad | reap(pid, "child");
}

static int daemonize(void)
{
	one_connection(1);
	if (daemon(1, 1) < 0)
		die("daemon");
	one_connection(2);
	printf("child %d ok\n", getpid());
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 4)
		die("usage: forkcore PORT gens|seq|signals|evict|sigmask|daemon|handlerfork|noenable ...");
	port = atoi(argv[1]);
	const char *mode = argv[2];
	int r;
	if (strcmp(mode, "gens") == 0 && argc == 5) {
		nbytes = atol(argv[4]);
		r = gens(0, atoi(argv[3]), dial());
	} else if (strcmp(mode, "seq") == 0 && argc == 5) {
		nbytes = atol(argv[4]);
		r = seq(atoi(argv[3]));
	} else {
		/* The modes whose one argument is BYTES. */
		static const struct {
			const char *name;
			int (*run)(void);
		} modes[] = {
			{"signals", signals}, {"evict", evict},
			{"sigmask", masks},   {"daemon", daemonize},
			{"handlerfork", handlerfork}, {"noenable", noenable},
		};
		size_t i = 0;
		while (i < sizeof modes / sizeof modes[0] && strcmp(mode, modes[i].name) != 0)
			i++;
		if (i == sizeof modes / sizeof modes[0])
			die("bad mode %s", mode);
		nbytes = atol(argv[3]);
		r = modes[i].run();
	}
	return r;
}
