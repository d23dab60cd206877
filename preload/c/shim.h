/*
 * shim.h - internals of libsdpshim.so shared by its source files.
 *
 * Layout of the library:
 *   real.c      the real libc entry points: resolved once, first, with
 *               dlsym(RTLD_NEXT); raw-syscall stand-ins until then
 *   fdtable.c   one state byte per fd, lock-free reads
 *   core.c      loading the Go core, Go-host detection, fallback counters
 *   log.c       the interposer's own few log lines
 *   sock.c      socket, bind, listen, accept, connect, options, names
 *   shortconn.c connects the short-lived rule keeps plain without the core
 *   recv.c      the receive side (read, recv, recvmsg, ..., the _chk ones)
 *   send.c      the send side (write, send, sendmsg, ..., sendfile, splice)
 *   wait.c      calling data hooks: errno, SIGPIPE, the SDPSHIM_WAIT loop
 *   fd.c        close, close_range, closefrom, dup*, fcntl, ioctl
 *   proc.c      fork, posix_spawn; vfork_x86_64.S, or the C vfork elsewhere
 *   poll.c      poll, ppoll, select, pselect; epoll.c the epoll calls
 *
 * Nothing here calls an interposed name directly: every libc call goes
 * through sdp_real, so the library never re-enters itself.
 */
#ifndef SDPSHIM_SHIM_H
#define SDPSHIM_SHIM_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "direct.h" /* the direct data path; also sdp_now_ns, the one clock */

#include "sdpshim_core.h"

#define SDP_EXPORT __attribute__((visibility("default")))
#define SDP_HIDDEN __attribute__((visibility("hidden")))
#define SDP_TLS __thread __attribute__((tls_model("initial-exec")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* ---- real libc entry points (real.c) ---------------------------------- */

/* X(name, return type, (parameters), (arguments)) for every interposed libc
 * function with a fixed parameter list; SDP_REAL_OTHER lists the variadic
 * ones and closefrom (void), whose stand-ins are written out by hand. */
#define SDP_REAL_FIXED(X)                                                                        \
	X(socket, int, (int d, int t, int p), (d, t, p))                                           \
	X(bind, int, (int fd, const struct sockaddr *a, socklen_t l), (fd, a, l))                  \
	X(listen, int, (int fd, int b), (fd, b))                                                   \
	X(accept, int, (int fd, struct sockaddr *a, socklen_t *l), (fd, a, l))                      \
	X(accept4, int, (int fd, struct sockaddr *a, socklen_t *l, int f), (fd, a, l, f))           \
	X(connect, int, (int fd, const struct sockaddr *a, socklen_t l), (fd, a, l))               \
	X(read, ssize_t, (int fd, void *b, size_t n), (fd, b, n))                                  \
	X(readv, ssize_t, (int fd, const struct iovec *v, int n), (fd, v, n))                      \
	X(write, ssize_t, (int fd, const void *b, size_t n), (fd, b, n))                           \
	X(writev, ssize_t, (int fd, const struct iovec *v, int n), (fd, v, n))                     \
	X(send, ssize_t, (int fd, const void *b, size_t n, int f), (fd, b, n, f))                  \
	X(sendto, ssize_t,                                                                         \
	  (int fd, const void *b, size_t n, int f, const struct sockaddr *a, socklen_t l),          \
	  (fd, b, n, f, a, l))                                                                     \
	X(sendmsg, ssize_t, (int fd, const struct msghdr *m, int f), (fd, m, f))                   \
	X(sendmmsg, int, (int fd, struct mmsghdr *v, unsigned int n, int f), (fd, v, n, f))        \
	X(recv, ssize_t, (int fd, void *b, size_t n, int f), (fd, b, n, f))                        \
	X(recvfrom, ssize_t, (int fd, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l), \
	  (fd, b, n, f, a, l))                                                                     \
	X(recvmsg, ssize_t, (int fd, struct msghdr *m, int f), (fd, m, f))                         \
	X(recvmmsg, int, (int fd, struct mmsghdr *v, unsigned int n, int f, struct timespec *t),   \
	  (fd, v, n, f, t))                                                                        \
	X(__read_chk, ssize_t, (int fd, void *b, size_t n, size_t bl), (fd, b, n, bl))             \
	X(__recv_chk, ssize_t, (int fd, void *b, size_t n, size_t bl, int f), (fd, b, n, bl, f))   \
	X(__recvfrom_chk, ssize_t,                                                                 \
	  (int fd, void *b, size_t n, size_t bl, int f, struct sockaddr *a, socklen_t *l),          \
	  (fd, b, n, bl, f, a, l))                                                                 \
	X(close, int, (int fd), (fd))                                                              \
	X(close_range, int, (unsigned int lo, unsigned int hi, int f), (lo, hi, f))                \
	X(shutdown, int, (int fd, int how), (fd, how))                                             \
	X(dup, int, (int fd), (fd))                                                                \
	X(dup2, int, (int o, int n), (o, n))                                                       \
	X(dup3, int, (int o, int n, int f), (o, n, f))                                             \
	X(getsockopt, int, (int fd, int lv, int nm, void *v, socklen_t *l), (fd, lv, nm, v, l))    \
	X(setsockopt, int, (int fd, int lv, int nm, const void *v, socklen_t l), (fd, lv, nm, v, l)) \
	X(getsockname, int, (int fd, struct sockaddr *a, socklen_t *l), (fd, a, l))                \
	X(getpeername, int, (int fd, struct sockaddr *a, socklen_t *l), (fd, a, l))                \
	X(sendfile, ssize_t, (int o, int i, off_t *off, size_t n), (o, i, off, n))                 \
	X(sendfile64, ssize_t, (int o, int i, off64_t *off, size_t n), (o, i, off, n))             \
	X(splice, ssize_t, (int i, loff_t *oi, int o, loff_t *oo, size_t n, unsigned int f),       \
	  (i, oi, o, oo, n, f))                                                                    \
	X(fork, pid_t, (void), ())                                                                 \
	X(posix_spawn, int,                                                                        \
	  (pid_t *p, const char *f, const posix_spawn_file_actions_t *fa,                          \
	   const posix_spawnattr_t *at, char *const av[], char *const ev[]),                       \
	  (p, f, fa, at, av, ev))                                                                  \
	X(posix_spawnp, int,                                                                       \
	  (pid_t *p, const char *f, const posix_spawn_file_actions_t *fa,                          \
	   const posix_spawnattr_t *at, char *const av[], char *const ev[]),                       \
	  (p, f, fa, at, av, ev))                                                                  \
	X(poll, int, (struct pollfd *fds, nfds_t n, int t), (fds, n, t))                           \
	X(ppoll, int, (struct pollfd *fds, nfds_t n, const struct timespec *t, const sigset_t *m), \
	  (fds, n, t, m))                                                                          \
	X(__poll_chk, int, (struct pollfd *fds, nfds_t n, int t, size_t l), (fds, n, t, l))         \
	X(__ppoll_chk, int,                                                                        \
	  (struct pollfd *fds, nfds_t n, const struct timespec *t, const sigset_t *m, size_t l),   \
	  (fds, n, t, m, l))                                                                       \
	X(select, int, (int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t), (n, r, w, e, t)) \
	X(pselect, int,                                                                            \
	  (int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t, const sigset_t *m),   \
	  (n, r, w, e, t, m))                                                                      \
	X(epoll_create, int, (int n), (n))                                                         \
	X(epoll_create1, int, (int f), (f))                                                        \
	X(epoll_ctl, int, (int ep, int op, int fd, struct epoll_event *ev), (ep, op, fd, ev))      \
	X(epoll_wait, int, (int ep, struct epoll_event *ev, int n, int t), (ep, ev, n, t))         \
	X(epoll_pwait, int, (int ep, struct epoll_event *ev, int n, int t, const sigset_t *m),     \
	  (ep, ev, n, t, m))                                                                       \
	X(epoll_pwait2, int,                                                                       \
	  (int ep, struct epoll_event *ev, int n, const struct timespec *t, const sigset_t *m),    \
	  (ep, ev, n, t, m))

#define SDP_REAL_OTHER(X)                                                                        \
	X(closefrom, void, (int lowfd), ())                                                        \
	X(fcntl, int, (int fd, int cmd, ...), ())                                                  \
	X(fcntl64, int, (int fd, int cmd, ...), ())                                                \
	X(ioctl, int, (int fd, unsigned long req, ...), ())

#define SDP_REAL_FIELD_(name, ret, params, args) ret(*name) params;
struct sdp_real {
	SDP_REAL_FIXED(SDP_REAL_FIELD_)
	SDP_REAL_OTHER(SDP_REAL_FIELD_)
};
#undef SDP_REAL_FIELD_

/* The real functions. Until sdp_init() has run, each pointer is a stub that
 * runs it (or, re-entered from inside it, makes the raw system call). */
SDP_HIDDEN extern struct sdp_real sdp_real;

/* Resolves every real entry point, once, from any thread (idempotent). */
SDP_HIDDEN void sdp_init(void);
/* The raw-syscall stand-ins, also used for symbols an older libc lacks. */
SDP_HIDDEN extern const struct sdp_real sdp_sys;

/* ---- thread-local state --------------------------------------------------- */

/* > 0 while this thread is inside the core or the library's own code: every
 * interposed call goes straight to libc. */
SDP_HIDDEN extern SDP_TLS int sdp_guard;
/* 1 in a vfork child (which runs on its parent's thread and TLS); set and
 * restored by vfork itself. A vfork child only passes through: it writes no
 * table entry and never loads or enters the core. */
SDP_HIDDEN extern SDP_TLS int sdp_vfork_child;

static inline int sdp_passthrough(void) { return sdp_guard | sdp_vfork_child; }
static inline void sdp_guard_enter(void) { sdp_guard++; }
static inline void sdp_guard_leave(void) { sdp_guard--; }

/* ---- fd table (fdtable.c) ----------------------------------------------- */

/* One state byte per fd, in chunks of SDP_FD_CHUNK fds allocated (mmap) the
 * first time an fd of their range gets a state, found through a fixed
 * directory that covers every fd number the kernel can hand out (fs.nr_open
 * is at most INT_MAX). A chunk, once published, is never moved or freed, so
 * reads take no lock and writes are single atomic byte stores: no lock, no
 * copy, safe from signal handlers and across fork. Untouched ranges cost no
 * memory; RLIMIT_NOFILE can be raised at any time. */
#define SDP_FD_CHUNK_SHIFT 16
#define SDP_FD_CHUNK (1u << SDP_FD_CHUNK_SHIFT)
#define SDP_FD_DIR (1u << (31 - SDP_FD_CHUNK_SHIFT))

SDP_HIDDEN extern unsigned char *sdp_fd_dir[SDP_FD_DIR];
/* Number of fds whose state is MANAGED or PROTECTED: 0 lets poll, select
 * and epoll_wait go to the kernel without looking at their sets. */
SDP_HIDDEN extern unsigned long sdp_fd_special;
/* Highest fd ever given a non-UNMANAGED state, -1 when none. */
SDP_HIDDEN extern int sdp_fd_hi;
/* Non-zero once this process may hold a connection whose acceptance
 * waits for its first use (SDP_FD_DEFERRED: accepted on a group listener,
 * inherited by a fork child or across exec): poll and select then claim
 * the deferred fds of their sets (poll.c). */
SDP_HIDDEN extern int sdp_deferred_hint;

/* The interposer's own fifth state, never shown to the core: in a fork
 * child whose parent kept its connections accelerated (host->fork_keep),
 * an fd the parent managed. Its first use makes the parent switch them to
 * kernel TCP (forkkeep.c); a close just closes it. */
#define SDP_FD_INHERITED 4

/* The interposer's sixth state, shown to the core as CANDIDATE: a TCP
 * socket made by socket() that the core has not been told of yet. The
 * calls the kernel answers alone on a socket that is not connected leave
 * it so: getsockopt, the socket options the core does not keep
 * (sock.c), bind, fcntl's flags and FIONBIO (the core reads O_NONBLOCK
 * when it adopts), close, and a connect that a plain run of the
 * short-lived rule keeps on kernel TCP (shortconn.c). Any other call
 * adopts it first (sdp_fd_adopt): the core's socket hook, after which it
 * is CANDIDATE as if socket() had called the hook. So a connection the
 * core does not take costs no runtime entry. */
#define SDP_FD_UNSEEN 5
/* An unseen socket while one thread adopts it (claimed by a
 * compare-and-swap from SDP_FD_UNSEEN): other threads' calls wait for
 * the adoption to end (sdp_fd_state), so the core makes one record of
 * the socket, and a close or a plain run's connect cannot come between
 * the adoption's look and its result. A signal handler interrupting the
 * adopting thread, and the core itself, take it as CANDIDATE. A fork child
 * finds it unseen again. */
#define SDP_FD_ADOPTING 7

/* The interposer's seventh state, shown to the core as CANDIDATE (and
 * read so by sdp_fd_state): a connection whose acceptance waits for its
 * first use (deferred acceptance: accepted on a group listener, then
 * inherited by fork children; or connected and inherited across exec).
 * poll and select claim these (poll.c), and only these: a listener or a
 * socket not connected has nothing to claim, and a claim is a runtime
 * entry (a postgres postmaster polls its listeners once per connection),
 * in a fork child the load of a core of its own. */
#define SDP_FD_DEFERRED 6

/* The state byte as stored (SDP_FD_INHERITED included): for the paths
 * that only release an fd (close), which must not switch anything. */
static inline int sdp_fd_state_raw(int fd)
{
	unsigned int i = (unsigned int)fd >> SDP_FD_CHUNK_SHIFT;
	if (i >= SDP_FD_DIR) /* fd < 0 */
		return SDPSHIM_FD_UNMANAGED;
	const unsigned char *c = __atomic_load_n(&sdp_fd_dir[i], __ATOMIC_ACQUIRE);
	if (c == NULL)
		return SDPSHIM_FD_UNMANAGED;
	return __atomic_load_n(&c[(unsigned int)fd & (SDP_FD_CHUNK - 1)], __ATOMIC_RELAXED);
}

/* Resolves the kept connections of a fork child (forkkeep.c): afterwards
 * no fd is SDP_FD_INHERITED. Returns fd's state then. */
SDP_HIDDEN int sdp_fork_kept_resolve(int fd);

/* Tells the core of unseen socket fd (sock.c), or waits for the thread
 * that does (fd ADOPTING): returns its state then, CANDIDATE, or
 * UNMANAGED when the core cannot have it (or fd is no TCP socket any
 * more: closed out of our sight, its number reused). From the core itself
 * (guard held) it adopts nothing and answers CANDIDATE. */
SDP_HIDDEN int sdp_fd_adopt(int fd);

static inline int sdp_fd_state(int fd)
{
	int s = sdp_fd_state_raw(fd);
	if (unlikely(s == SDP_FD_INHERITED))
		return sdp_fork_kept_resolve(fd);
	if (unlikely(s == SDP_FD_UNSEEN || s == SDP_FD_ADOPTING))
		return sdp_fd_adopt(fd);
	return s == SDP_FD_DEFERRED ? SDPSHIM_FD_CANDIDATE : s;
}

/* sdp_fd_state for a look that adopts nothing: an unseen socket reads as
 * CANDIDATE (what poll, select and the release paths treat as a kernel
 * socket). */
static inline int sdp_fd_state_look(int fd)
{
	int s = sdp_fd_state_raw(fd);
	return s == SDP_FD_UNSEEN || s == SDP_FD_ADOPTING ? SDPSHIM_FD_CANDIDATE : sdp_fd_state(fd);
}

/* The hot-path test: an fd nobody has marked goes straight to libc (one
 * load and one compare; an inherited fd is not plain, its slow path
 * resolves it through sdp_fd_state). */
static inline int sdp_fd_plain(int fd) { return sdp_fd_state_raw(fd) == SDPSHIM_FD_UNMANAGED; }

static inline int sdp_fd_any_special(void)
{
	return __atomic_load_n(&sdp_fd_special, __ATOMIC_RELAXED) != 0;
}

static inline int sdp_fd_is_special(int state)
{
	return state == SDPSHIM_FD_MANAGED || state == SDPSHIM_FD_PROTECTED || state == SDP_FD_INHERITED;
}

/* Sets the state of fd: 0, -EBADF or -ENOMEM. */
SDP_HIDDEN int sdp_fd_set(int fd, int state);
/* Sets the state of fd to to if it is from: 1, or 0 when it was not (or
 * the table cannot grow). */
SDP_HIDDEN int sdp_fd_cas(int fd, int from, int to);
/* Sets a fresh fd (just returned by socket, accept, dup, ...) to state,
 * clearing whatever an fd of that number left behind when it was closed out
 * of our sight (fclose of an fdopen()ed socket, a raw close syscall). */
static inline void sdp_fd_fresh(int fd, int state)
{
	if (state != SDPSHIM_FD_UNMANAGED || !sdp_fd_plain(fd))
		sdp_fd_set(fd, state);
}
/* Fork child: every MANAGED or PROTECTED fd set UNMANAGED (returns how
 * many were MANAGED); CANDIDATE, unseen and deferred ones (listeners,
 * unconnected sockets, connections not accepted yet) stay,
 * for the child's own copy of the core (core.c), or, when it has none, so
 * that what the child accepts on them is counted (sock.c). */
SDP_HIDDEN unsigned long sdp_fd_forget_all(void);
/* The number of fd states, the interposer's own included. */
#define SDP_FD_STATES 8
/* Every fd in a state s other than UNMANAGED set to to[s] (-1: left as
 * it is); returns how many were in state counted. The fork child's one
 * pass over the table (forget_all above, forkkeep.c). */
SDP_HIDDEN unsigned long sdp_fd_recast(const signed char to[SDP_FD_STATES], int counted);

/* ---- accepts decided without the core (plainaccept.c) ------------------------- */

/* host->accept_listener, accept_held, accept_quiet (sdpshim_core.h). */
SDP_HIDDEN void sdp_plain_listener(int fd, uint64_t cookie);
SDP_HIDDEN void sdp_plain_held(uint32_t n);
SDP_HIDDEN void sdp_plain_quiet(const char *dir, uint64_t dev, uint64_t ino, int64_t sec, int64_t nsec, int rvfd);
/* host->accept_plain: the accepts decided here (fallback[] also counts the
 * core's peer-not-shimmed ones: the core adds only these to its own). */
SDP_HIDDEN extern uint64_t sdp_plain_accepts;
/* fd was just accepted on lfd: 1 when nobody can have offered it (it
 * stays on kernel TCP, counted, traced and logged here), 0: ask the core.
 * Keeps errno. */
SDP_HIDDEN int sdp_plain_accept(int lfd, int fd);
/* Fork child: the parent's marks and counts are not the child's. */
SDP_HIDDEN void sdp_plain_forget(void);

/* ---- connects kept plain without the core (shortconn.c) ----------------------- */

/* host->short_run, short_left, short_take (sdpshim_core.h). */
SDP_HIDDEN int sdp_short_run(const uint8_t *addr, uint32_t alen, uint16_t port, int32_t n);
SDP_HIDDEN int sdp_short_left(const uint8_t *addr, uint32_t alen, uint16_t port);
SDP_HIDDEN int sdp_short_take(const uint8_t *addr, uint32_t alen, uint16_t port);
/* host->short_plain: the connects kept plain here. */
SDP_HIDDEN extern uint64_t sdp_short_plains;
/* A connect of unseen socket fd to addr: 1 when a plain run takes it (fd
 * is UNMANAGED then, counted, traced and logged; the caller connects it
 * on the kernel), 0: the core decides. Keeps errno. */
SDP_HIDDEN int sdp_short_connect(int fd, const struct sockaddr *addr, socklen_t len);
/* Fork child: the parent's runs are its core's, not the child's. */
SDP_HIDDEN void sdp_short_forget(void);

/* ---- connections kept across fork (forkkeep.c) ------------------------------ */

/* host->fork_keep: the child's end of the request pair of the fork
 * about to happen (-1: none) and the core's end. fork() takes them
 * (sdp_fork_keep_take returns the child's, *mine the core's). */
SDP_HIDDEN void sdp_fork_keep(int fd, int mine);
SDP_HIDDEN int sdp_fork_keep_take(int *mine);
/* Fork child, before fork() returns (async-signal-safe), when the parent
 * kept connections: fd is the request end (mine, the parent's, is closed
 * here); the MANAGED fds wait as SDP_FD_INHERITED. 1 when it took over
 * the fds (the caller forgets nothing more), 0 when fd < 0. */
SDP_HIDDEN int sdp_fork_keep_child(int fd, int mine);
/* An SDP_FD_INHERITED fd closes: its state and its handle slot go, and
 * the parent's core is told (a connection no child holds ends with the
 * parent's close). */
SDP_HIDDEN void sdp_fd_drop_inherited(int fd);
/* 1 when fd is SDP_FD_INHERITED and this fork child goes on over its
 * area without the parent's switch (the data calls, fcntl's flags,
 * getsockname, getpeername, poll, select). */
SDP_HIDDEN int sdp_fork_kept_continues(int fd);
/* A fork child that holds kept connections forks in turn (no core: the
 * interposer's fork): the parent's core is told, since a close here no
 * longer means this family of processes let go of the connection. */
SDP_HIDDEN void sdp_fork_keep_forking(void);

/* ---- the core (core.c) ---------------------------------------------------- */

/* The core's life in one process:
 *
 *   UNLOADED --first need--> LOADING --ok--> READY
 *                                    \--fail--> OFF (reason kept)
 *   FORKED   --first need--> LOADING (of the private copy) --> READY / OFF
 *
 * First need: a TCP socket(), or (FORKED) any call routed on a CANDIDATE
 * fd. At fork(), the child's state is the parent's, except: READY with a
 * next-core copy -> FORKED (the copy is the child's to load); READY without
 * one, or LOADING -> OFF (fork-exec-decline). A FORKED process that forks
 * gives its child the same unused copy (FORKED). */
enum sdp_core_state {
	SDP_CORE_UNLOADED = 0, /* not tried yet */
	SDP_CORE_LOADING = 1,  /* one thread is loading it */
	SDP_CORE_READY = 2,    /* loaded and running: hooks may be called */
	SDP_CORE_OFF = 3,      /* never (again) in this process */
	SDP_CORE_FORKED = 4,   /* fork child: a private copy of the parent's core
				* waits in a memfd, loaded on first need */
};

#define SDP_CORE_FIELD_(ret, name, params) sdpshim_core_##name##_fn *name;
struct sdp_core {
	SDPSHIM_CORE_ENTRY_POINTS(SDP_CORE_FIELD_)
};
#undef SDP_CORE_FIELD_

SDP_HIDDEN extern struct sdp_core sdp_core;
SDP_HIDDEN extern int sdp_core_state;

static inline int sdp_core_ready(void)
{
	return __atomic_load_n(&sdp_core_state, __ATOMIC_ACQUIRE) == SDP_CORE_READY;
}

/* Loads the core if it was never tried, or its private copy in a FORKED
 * process (waiting up to 2 s for another thread that is loading it);
 * returns 1 when it is ready. */
SDP_HIDDEN int sdp_core_acquire(void);

/* For a call on a CANDIDATE fd: 1 when the core is ready, loading it first
 * if that is still to be done (cold): a fork child's private copy, or the
 * core of a program that inherited CANDIDATE fds across exec (exec.c). */
static inline int sdp_core_want(void)
{
	int s = __atomic_load_n(&sdp_core_state, __ATOMIC_ACQUIRE);
	if (likely(s == SDP_CORE_READY))
		return 1;
	return (s == SDP_CORE_FORKED || s == SDP_CORE_LOADING || s == SDP_CORE_UNLOADED) && sdp_core_acquire();
}
/* Constructor (exec.c): the exec functions, and the CANDIDATE fds an exec
 * passed (SDPSHIM__INHERITED_FDS). */
SDP_HIDDEN void sdp_exec_init(void);
/* Why the core is off (enum sdpshim_reason), 0 while it is not. */
SDP_HIDDEN int sdp_core_off_reason(void);
SDP_HIDDEN void sdp_fallback_count(int reason);
/* Counts a fallback the interposer decided itself and fires the fallback
 * probe (probe.c); fd is the socket, or -1. Async-signal-safe. */
SDP_HIDDEN void sdp_fallback_note(int reason, int fd);
/* Fork child, before fork() returns (async-signal-safe; keep: the
 * request end of connections the parent kept, or -1, and mine the
 * parent's end): the state
 * changes above, the old core's C fork_child hook, MANAGED and PROTECTED
 * fds forgotten (or left to forkkeep.c), signal handlers of the dead image given back their
 * pre-core actions. */
SDP_HIDDEN void sdp_core_atfork_child(int keep, int mine);
/* Counts n fds a fork child found switched to kernel TCP (fork-exec-
 * decline) and fires the fallback probe once. Async-signal-safe. */
SDP_HIDDEN void sdp_fork_decline_count(unsigned long n);
/* Makes sure the next-core copy exists (once per process; bounded wait
 * when another thread makes it): before a fork, or ahead
 * (host->fork_ready). Failure is logged once; children then stay on
 * kernel TCP. */
SDP_HIDDEN void sdp_core_prepare_fork(void);
/* Parent, before fork() while the core is READY: the copy, from the
 * process's second fork on (the first one's child makes its own if it
 * needs a core); then the fork is counted in, and no other thread makes
 * a copy until sdp_core_fork_done. */
SDP_HIDDEN void sdp_core_fork_copy(void);
/* Before any fork once a core was loaded: a thread running a signal
 * handler on the signal stack the Go runtime gave it (the runtime adds
 * SA_ONSTACK to the program's handlers, and its own handlers forward to
 * the program's there; a pre-fork server may fork from its SIGCHLD
 * handler) forks on memory that fork children do not get
 * (preload/entry/forkmem.c): that stack's pages are made inheritable
 * again, for good. Async-signal-safe; errno is kept. */
SDP_HIDDEN void sdp_core_fork_stack(void);
/* Fork child: a signal stack that is not mapped here (the parent's
 * runtime's) is taken away, leaving the thread as it was before the
 * runtime gave it one; a signal delivered on it would kill the child.
 * Async-signal-safe; errno is kept. */
SDP_HIDDEN void sdp_altstack_check(void);
/* Before a fork whose child may enter the parent's runtime (one made
 * inside a hook): the runtime's memory is inherited by it and every later
 * child (sdpshim_core_fork_inherit). Async-signal-safe. */
SDP_HIDDEN void sdp_core_fork_inherit_all(void);
/* Registers the fork handlers of proc.c for the forks libc makes on its
 * own (daemon()), once; at the first core load. */
SDP_HIDDEN void sdp_fork_register(void);
/* After fork() in the parent, when sdp_core_fork_copy ran before it. */
SDP_HIDDEN void sdp_core_fork_done(void);
/* Sleeps (FUTEX_WAIT_PRIVATE) while *word holds val, until deadline
 * (sdp_now_ns); returns the value that ended the wait (val at the
 * deadline). errno is kept. The interposer's one bounded wait for
 * another thread's progress (core load, core copy, fork resolution). */
SDP_HIDDEN int sdp_futex_wait_while(int *word, int val, int64_t deadline);
/* Whether a fork, posix_spawn or vfork must call the core's fork_prepare
 * (host->fork_work): 1 until the core said otherwise. */
SDP_HIDDEN int sdp_core_fork_needed(void);
/* dup2/dup3 onto a PROTECTED fd of the interposer's own (the core copies):
 * moves it to another number and returns 0; -1 when fd is not one. */
SDP_HIDDEN int sdp_core_evict_own(int fd);
/* Absolute path of this library, computed by the constructor. */
SDP_HIDDEN void sdp_core_note_self(void);

/* 1 once this thread called into the core: a program thread. The Go
 * runtime's own threads never do (they call back the host), so a thread
 * whose runtime g is set without it is one of the runtime's (core.c). */
SDP_HIDDEN extern SDP_TLS int sdp_thread_calls_core;

/* The first call of a thread into the core binds it a Go M, and the M's
 * set-up (runtime.minit) unblocks SIGCHLD, SIGPROF, SIGURG and the
 * synchronous signals in the thread for good (the M stays bound): a
 * program that blocks SIGCHLD to decide when its handler runs (the
 * postgres postmaster) would get it anywhere. So that first call saves
 * the thread's signal mask (sdp_thread_first) and puts it back after
 * (sdp_thread_first_done); later calls cost nothing. */
SDP_HIDDEN void sdp_thread_first(sigset_t *saved);
SDP_HIDDEN void sdp_thread_first_done(const sigset_t *saved);

/* Enter/leave the core around one hook call. */
#define SDP_CORE_CALL(expr)                                                                      \
	({                                                                                            \
		sigset_t m_;                                                                          \
		int first_ = unlikely(!sdp_thread_calls_core);                                        \
		if (first_)                                                                           \
			sdp_thread_first(&m_);                                                        \
		sdp_guard_enter();                                                                    \
		__typeof__(expr) r_ = (expr);                                                          \
		sdp_guard_leave();                                                                    \
		if (first_)                                                                           \
			sdp_thread_first_done(&m_);                                                   \
		r_;                                                                                   \
	})

/* The same for a hook returning nothing. */
#define SDP_CORE_DO(expr)                                                                        \
	do {                                                                                         \
		sigset_t m_;                                                                          \
		int first_ = unlikely(!sdp_thread_calls_core);                                        \
		if (first_)                                                                           \
			sdp_thread_first(&m_);                                                        \
		sdp_guard_enter();                                                                    \
		(expr);                                                                               \
		sdp_guard_leave();                                                                    \
		if (first_)                                                                           \
			sdp_thread_first_done(&m_);                                                   \
	} while (0)

/* How a call on fd is routed. */
enum sdp_route { SDP_ROUTE_REAL, SDP_ROUTE_CORE, SDP_ROUTE_BADF };

/* The route of a call on an fd in state s (sdp_fd_state's). */
static inline int sdp_route_of(int s)
{
	if (s == SDPSHIM_FD_UNMANAGED || sdp_passthrough())
		return SDP_ROUTE_REAL;
	if (s == SDPSHIM_FD_PROTECTED)
		return SDP_ROUTE_BADF;
	return sdp_core_want() ? SDP_ROUTE_CORE : SDP_ROUTE_REAL;
}

static inline int sdp_route(int fd) { return sdp_route_of(sdp_fd_state(fd)); }

/* 1 when fd is inherited by a fork child that goes on over its area
 * (forkkeep.c): the calls the interposer answers there alone (the data
 * calls, fcntl's flags, the names, poll, select, shutdown(SHUT_WR), the
 * common socket options) take it without the parent's switch. */
static inline int sdp_fd_continues(int fd)
{
	return sdp_fd_state_raw(fd) == SDP_FD_INHERITED && !sdp_passthrough() && sdp_fork_kept_continues(fd);
}

/* The route of a data call: CORE for an inherited fd that goes on over
 * its area (sdp_fd_continues); the caller's direct attempt then answers
 * it, or resolves it (sdp_direct_only). The state byte is loaded once:
 * this is every managed socket's data path. */
static inline int sdp_route_io(int fd)
{
	int s = sdp_fd_state_raw(fd);
	if (unlikely(s == SDP_FD_INHERITED)) {
		if (!sdp_passthrough() && sdp_fork_kept_continues(fd))
			return SDP_ROUTE_CORE;
		s = sdp_fork_kept_resolve(fd);
	} else if (unlikely(s == SDP_FD_UNSEEN || s == SDP_FD_ADOPTING)) {
		s = sdp_fd_adopt(fd); /* a send with MSG_FASTOPEN, or a call the kernel fails */
	}
	return sdp_route_of(s);
}

/* Route for a call on two fds: BADF if either is protected, CORE if either
 * goes to the core. */
static inline int sdp_route2(int a, int b)
{
	int ra = sdp_route(a), rb = sdp_route(b);
	if (ra == SDP_ROUTE_BADF || rb == SDP_ROUTE_BADF)
		return SDP_ROUTE_BADF;
	return ra == SDP_ROUTE_CORE || rb == SDP_ROUTE_CORE ? SDP_ROUTE_CORE : SDP_ROUTE_REAL;
}

/* In a slow path: returns real_call or EBADF unless route is CORE. */
#define SDP_ROUTE_OR(route, real_call)                                                           \
	switch (route) {                                                                          \
	case SDP_ROUTE_REAL:                                                                      \
		return real_call;                                                                 \
	case SDP_ROUTE_BADF:                                                                      \
		return sdp_fail(EBADF);                                                           \
	}

#define SDP_COLD __attribute__((noinline, cold))

/* ---- calling the core's data hooks (wait.c) ---------------------------------- */

/* Each calls its hook until it answers something else than SDPSHIM_WAIT,
 * sleeping in between as it says, and returns the hook's result with the
 * progress of earlier rounds added (SDPSHIM_PASS only when nothing moved). */
SDP_HIDDEN long sdp_core_recv(int fd, void *buf, size_t n, int flags);
SDP_HIDDEN long sdp_core_send(int fd, const void *buf, size_t n, int flags);
SDP_HIDDEN long sdp_core_recvmsg(int fd, struct msghdr *m, int flags);
SDP_HIDDEN long sdp_core_sendmsg(int fd, const struct msghdr *m, int flags);
SDP_HIDDEN long sdp_core_sendfile(int out, int in, off_t *off, size_t n);
SDP_HIDDEN long sdp_core_splice(int in, loff_t *oi, int out, loff_t *oo, size_t n, unsigned int flags);

/* Pointers by fd, in chunks of SDP_FD_CHUNK made on first use and never
 * freed or moved (as the state bytes above), and one past the highest fd
 * a slot was made for (0 in a table never written: a static table is
 * zeroed). A fork child inherits them as they are. */
struct sdp_fd_ptrs {
	void **dir[SDP_FD_DIR];
	int end;
};
/* The slot of fd in t, or NULL (fd out of range; no chunk yet and make
 * is 0, or no memory). */
SDP_HIDDEN void **sdp_fd_ptr_slot(struct sdp_fd_ptrs *t, int fd, int make);
/* Fork child (async-signal-safe): every slot of t set to NULL. Only
 * slots that hold a pointer are written, so the child copies no page of
 * the parent's chunks that held nothing (clearing whole 512 KiB chunks
 * cost each fork child 256 copy-on-write faults), and only up to t's own
 * end: walking every table up to the highest fd the shim marked (its own
 * fds among them) cost a fork child about 20 us. */
SDP_HIDDEN void sdp_fd_ptr_clear_all(struct sdp_fd_ptrs *t);

/* ---- the direct data path (directio.c) ----------------------------------------- */

/* The data calls on an fd the core attached a direct handle to, made
 * without entering the core; SDPSHIM_PASS when fd has none or the call is
 * the core's (the caller then calls the core's hook). */
SDP_HIDDEN long sdp_direct_recv(int fd, void *buf, size_t n, int flags);
SDP_HIDDEN long sdp_direct_send(int fd, const void *buf, size_t n, int flags);
SDP_HIDDEN long sdp_direct_msg(int send, int fd, struct msghdr *m, int flags);
/* host->direct_attach. */
SDP_HIDDEN void sdp_direct_attach(int fd, void *conn);
/* For poll, ppoll, select and pselect (poll.c): the handle of fd, held,
 * when its readiness is answered here (attached, and none of its calls is
 * the core's: no shutdown(SHUT_RD), no early bytes, no switch to kernel
 * TCP), else NULL; sdp_direct_put releases it. */
struct sdp_dconn;
SDP_HIDDEN struct sdp_dconn *sdp_direct_poll_get(int fd);
SDP_HIDDEN void sdp_direct_put(struct sdp_dconn *c);
/* Fork child: forgets every handle (async-signal-safe). */
SDP_HIDDEN void sdp_direct_forget_all(void);
/* Fork child whose parent could not switch what it kept: every handle's
 * connection reset (the peer sees ECONNRESET and closes its end), but
 * those the parent switched before it went (sdp_dconn_switched). */
SDP_HIDDEN int sdp_direct_reset_all(void); /* how many it reset */
/* Fork child: 1 when fd's inherited handle can go on over the area (no
 * switch begun, no call the core's); its first such use in this process
 * makes it the child's (no bell, the socket's flags read again). */
SDP_HIDDEN int sdp_direct_inherit(int fd);
/* shutdown(fd, SHUT_WR) outside the core (a fork child): the FIN in the
 * area. 0, or SDPSHIM_PASS when fd's handle does not take it. */
SDP_HIDDEN long sdp_direct_shut_wr(int fd);
/* A fork child going on over fd's inherited area (forkkeep.c): 1 when
 * the socket option (level, name) is the kernel's to answer (get, or set
 * with val) with nothing else to do, or only the handle's copy to update
 * (set: done here, before the kernel's call); 0 when it needs the
 * parent's switch. */
SDP_HIDDEN int sdp_direct_inherited_sockopt(int fd, int set, int level, int name, const void *val, socklen_t len);
/* O_NONBLOCK set or cleared on fd outside the core (a fork child). */
SDP_HIDDEN void sdp_direct_nonblock(int fd, int on);

/* ---- local wakes of poll and select sleepers (pollkick.c) ------------------------ */

/* The calling thread enters the poll engine with managed entries: its
 * eventfd for the ppoll set (made at first use), or -1 (none: sleep in
 * slices). */
SDP_HIDDEN int sdp_pollkick_begin(void);
/* Its sleep was ended by its eventfd: empties it. */
SDP_HIDDEN void sdp_pollkick_woke(void);
/* It leaves the engine. */
SDP_HIDDEN void sdp_pollkick_end(void);
/* host->poll_kick: writes the eventfd of every thread in the engine. */
SDP_HIDDEN void sdp_pollkick_all(void);
/* The calling thread's bell number (its slot's eventfd among the
 * process's bells, direct.h; the slot is taken at first use), or 0: it
 * has none (peers ring its sockets). */
SDP_HIDDEN uint32_t sdp_pollkick_bell(void);
/* host->poll_bells: the eventfds of the first max bell slots (-1: not
 * made yet); returns how many it wrote. They stay open for the life of
 * the process (a fork child closes its copies). */
SDP_HIDDEN int sdp_pollkick_bells(int *fds, int max);
/* Fork child (async-signal-safe): the parent's eventfds are closed. */
SDP_HIDDEN void sdp_pollkick_forget_all(void);
/* Where the shim's own fds go (core.c). */
SDP_HIDDEN int sdp_core_high_fd(void);

/* ---- epoll waits the interposer answers alone (epollfast.c) --------------------- */

struct epoll_event;
/* host->epoll_publish and host->epoll_stale. */
SDP_HIDDEN struct sdpshim_eset *sdp_epoll_publish(int epfd, struct sdpshim_eset *t);
SDP_HIDDEN void sdp_epoll_stale(int epfd);
SDP_HIDDEN int sdp_epoll_update(int epfd, int fd, uint32_t events, uint64_t data);
SDP_HIDDEN int sdp_epoll_append(int epfd, const struct sdpshim_eset_entry *entry);
/* Fork child (async-signal-safe): no table of the parent's is the child's. */
SDP_HIDDEN void sdp_epoll_forget_all(void);
struct sdp_sigmark; /* sigcount.h */
/* Before a wait: the ready events (> 0), or 0 with every socket entry
 * armed for the kernel's wait that follows, or SDPSHIM_PASS: the core's
 * wait. spin: poll for the adaptive budget first, not past deadline
 * (sdp_now_ns; 0: none) nor past a handler that ran since mark (NULL:
 * none). *gen: the table's generation the scan saw (for
 * sdp_epoll_sleep_begin). */
SDP_HIDDEN int sdp_epoll_fast_look(int epfd, struct epoll_event *ev, int max, int spin, int64_t deadline,
				   const struct sdp_sigmark *mark, uint32_t *gen);
/* After the kernel's wait returned ev[:k]: the program's events and the
 * ready sockets (0: wait again, armed), or SDPSHIM_PASS when the core
 * takes over, with the kernel's events it must still see in ev[:*left].
 * *gen as sdp_epoll_fast_look's. */
SDP_HIDDEN int sdp_epoll_fast_after(int epfd, struct epoll_event *ev, int max, int k, int *left, uint32_t *gen);
/* Around the kernel's wait: the table counted in as read and as slept on
 * (a change of the set by the core then writes its kick eventfd), or NULL
 * when it went stale, or an entry's events changed since the scan of
 * generation gen, meanwhile (the core takes over). */
SDP_HIDDEN struct sdpshim_eset *sdp_epoll_sleep_begin(int epfd, uint32_t gen);
SDP_HIDDEN void sdp_epoll_sleep_end(struct sdpshim_eset *t);

/* ---- helpers (wait.c, core.c, log.c) ------------------------------------------ */

struct sdp_sigmark;
/* One sleep of a call that answered SDPSHIM_WAIT: adds w->done to *total
 * (never beyond len), sleeps, and returns 0 to go on, or the call's result
 * (EINTR or the progress) when a signal ends it. */
SDP_HIDDEN long sdp_wait_step(const struct sdpshim_wait *w, uint64_t *total, uint64_t len, struct sdp_sigmark *mark);

/* Sleeps as *w says; 0, or EINTR when a signal handler interrupted it. */
SDP_HIDDEN int sdp_wait(const struct sdpshim_wait *w);
/* (Kernel sleeps on the program's behalf use the caller's mask as it is:
 * the core's runtime sends no signal of its own, its asynchronous
 * preemption, SIGURG, being off: preload/entry/godebug.conf.) */
/* Blocks the program's asynchronous signals (all but the synchronous
 * ones) for the time an event engine spends in the core before
 * its kernel sleep, saving the mask in *old: a signal that comes meanwhile
 * stays pending and interrupts the sleep (made with *old, or the caller's
 * mask), as it would a kernel epoll_wait it came during, instead of being
 * handled before a sleep that would then not end. sdp_signals_release
 * restores *old. */
SDP_HIDDEN void sdp_signals_hold(sigset_t *old);
SDP_HIDDEN void sdp_signals_release(const sigset_t *old);
/* Turns a hook result into a libc result: sets errno from -errno, raises
 * SIGPIPE on -EPIPE when sigpipe is set. SDPSHIM_PASS must be handled before. */
SDP_HIDDEN long sdp_result(long r, int sigpipe);
/* -1 with errno set to err. */
SDP_HIDDEN long sdp_fail(int err);

enum sdp_log_level { SDP_LOG_OFF, SDP_LOG_ERROR, SDP_LOG_WARN, SDP_LOG_INFO, SDP_LOG_DEBUG };
SDP_HIDDEN void sdp_log_setup(void);
SDP_HIDDEN void sdp_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A configuration problem: logged at error level, or to stderr when the log
 * level is below error, so a typo never silently turns the shim off. */
SDP_HIDDEN void sdp_report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* SDPSHIM_SHIM_H */
