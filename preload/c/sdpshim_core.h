/*
 * sdpshim_core.h - the C ABI between libsdpshim.so (the C interposer) and
 * libsdpshim-core.so (the Go core, -buildmode=c-shared).
 *
 * Direction of calls
 *   - The interposer dlopen()s the core (RTLD_NOW|RTLD_LOCAL) on the first
 *     TCP socket of a process and looks up every entry point listed in
 *     SDPSHIM_CORE_ENTRY_POINTS with dlsym(). A missing one disables the
 *     core for the life of the process (reason SDPSHIM_REASON_CORE_SYMBOL).
 *   - The core calls back only through the function pointers of struct
 *     sdpshim_host, handed to sdpshim_core_init(); libsdpshim.so exports
 *     nothing but the interposed libc names.
 *
 * Rules every entry point follows
 *   - Called with the interposer's thread-local guard held: libc calls the
 *     core makes on the calling thread (cgo) go straight to libc. Goroutines
 *     on other threads are not guarded: the core makes its own system calls
 *     directly (Go's syscall package), or brackets a libc call with
 *     host->guard_enter()/guard_leave().
 *   - Called only for fds whose state is CANDIDATE or MANAGED (or, for
 *     dup2/dup3 targets, PROTECTED: sdpshim_core_evict). UNMANAGED fds never
 *     reach the core; the interposer calls libc for them.
 *   - Results: a count or 0 on success, -errno on failure (the interposer
 *     sets errno), or one of two special values:
 *       SDPSHIM_PASS  the interposer performs the original libc call itself,
 *                     unchanged (the core declines this one call);
 *       SDPSHIM_WAIT  (only hooks taking a struct sdpshim_wait *) the call
 *                     would block: the core filled *w, the interposer sleeps
 *                     in the kernel as described there and calls the hook
 *                     again for what is left. w->done is how many bytes this
 *                     call moved before it had to wait (a blocking send
 *                     larger than the free blocks, recv with MSG_WAITALL):
 *                     the next call gets buf + done and len - done (iovecs
 *                     advanced likewise, no control data; sendfile and
 *                     splice get count - done and keep their offsets up to
 *                     date themselves), and the interposer adds the counts
 *                     up. After progress, an error or a signal ends the call
 *                     with the progress, as the kernel does; the error is
 *                     the core's to report again on the next call.
 *     The data path is one C->Go call per operation; the interposer adds no
 *     system call of its own unless the core returns SDPSHIM_WAIT or
 *     SDPSHIM_PASS.
 *   - SIGPIPE: the core never raises it; it sends with MSG_NOSIGNAL and
 *     returns -EPIPE. The interposer raises SIGPIPE when the caller did not
 *     pass MSG_NOSIGNAL (write, writev, sendfile and splice never do).
 *   - A hook may get an fd the core does not know: one closed behind the
 *     interposer's back (fclose() of an fdopen()ed socket, a raw close
 *     system call) whose number was reused. It sets the fd UNMANAGED and
 *     returns SDPSHIM_PASS.
 *   - fd states change only through host->fd_set_state() or the state a hook
 *     returns. CANDIDATE -> MANAGED happens inside the connect, accept,
 *     sendmsg (MSG_FASTOPEN) hooks, never behind the program's back, so
 *     poll/select can treat CANDIDATE fds as plain kernel fds.
 *
 * Go note: cgo's generated export header declares pointers without const;
 * the prototypes here therefore carry no const either (read-only arguments
 * are documented as such) so that preload/entry may include this header.
 */
#ifndef SDPSHIM_CORE_H
#define SDPSHIM_CORE_H

#include <poll.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on every incompatible change to this file. */
#define SDPSHIM_CORE_ABI 2

/* Special hook results, outside the -errno range (-4095..-1). */
#define SDPSHIM_PASS (-0x10000)
#define SDPSHIM_WAIT (-0x10001)

/* Per-fd state, one byte per fd in the interposer's table. */
enum sdpshim_fd_state {
	/* Not ours: every call goes straight to libc, the core never sees it. */
	SDPSHIM_FD_UNMANAGED = 0,
	/* An AF_INET/AF_INET6 SOCK_STREAM socket created while the core was
	 * loaded, not yet decided (before connect/accept). */
	SDPSHIM_FD_CANDIDATE = 1,
	/* Accelerated: its bytes move through the core. Also an epoll fd whose
	 * interest list the core emulates (epoll_wait goes to the core). */
	SDPSHIM_FD_MANAGED = 2,
	/* Owned by the core or the Go runtime (netpoll epoll fd, eventfds,
	 * memfds, log file). Invisible to the program: its calls on it fail with
	 * EBADF, close_range skips it, dup2/dup3 onto it first asks
	 * sdpshim_core_evict. The core clears the state before closing one. */
	SDPSHIM_FD_PROTECTED = 3,
};

/* Why a TCP connection or a whole process stays on kernel TCP: the stable
 * codes of docs/reasons.md. 1..63 belong to the core (core/rendezvous,
 * Reason); the interposer uses two of them and numbers its own from 64.
 * Counters are kept per code, SDPSHIM_REASON_MAX of them. */
enum sdpshim_reason {
	SDPSHIM_REASON_NONE = 0,
	SDPSHIM_REASON_NOT_SHIMMED = 1, /* peer-not-shimmed: nobody offered the
					 * connection (plainaccept.c decides some) */
	SDPSHIM_REASON_FORK_DECLINE = 9, /* fork-exec-decline: fork child of a
					  * process running the core */
	SDPSHIM_REASON_BAD_SETTING = 10, /* disabled-by-setting: bad
					  * SDPSHIM_ENABLE or SDPSHIM_CORE */
	SDPSHIM_REASON_SHORT_LIVED = 14, /* short-lived: a plain run of the
					  * short-lived rule (shortconn.c keeps some) */
	SDPSHIM_REASON_SHIM_FIRST = 64,
	SDPSHIM_REASON_SHIM_OFF = 64,      /* shim-off: SDPSHIM_ENABLE=0 */
	SDPSHIM_REASON_SECURE_EXEC = 65,   /* secure-exec: AT_SECURE process */
	SDPSHIM_REASON_GO_HOST = 66,       /* go-host: a Go runtime is already loaded */
	SDPSHIM_REASON_CORE_MISSING = 67,  /* core-missing: dlopen failed */
	SDPSHIM_REASON_CORE_INCOMPLETE = 68, /* core-incomplete: an entry point is missing */
	SDPSHIM_REASON_CORE_DECLINED = 69, /* core-declined: init gave no valid code */
	SDPSHIM_REASON_CORE_FAILED = 70,   /* core-failed: init returned -errno */
	SDPSHIM_REASON_CORE_BUSY = 71,     /* core-busy: still loading after 2 s */
	SDPSHIM_REASON_VFORK_CHILD = 72,   /* vfork-child: socket made in a vfork child */
	SDPSHIM_REASON_MAX = 128,
};

/* How the interposer sleeps when a hook returns SDPSHIM_WAIT. After the
 * sleep (whatever woke it) it calls the hook again; the hook decides whether
 * the wait is over or has timed out (SO_RCVTIMEO is the core's business). */
enum sdpshim_wait_kind {
	/* futex(FUTEX_WAIT) on a 32-bit word, shared (not private), so it may
	 * live in memory shared with the peer. The kernel restarts the sleep
	 * after a signal handler with SA_RESTART and no timeout, and returns
	 * EINTR otherwise: exactly recv/send/connect semantics. Use it for
	 * blocking data calls. */
	SDPSHIM_WAIT_FUTEX = 1,
	/* ppoll() on one fd (a doorbell eventfd or the TCP socket): EINTR after
	 * any signal handler, like poll. */
	SDPSHIM_WAIT_FD = 2,
};

struct sdpshim_wait {
	int32_t kind;       /* enum sdpshim_wait_kind */
	int32_t fd;         /* WAIT_FD: the fd */
	int16_t events;     /* WAIT_FD: poll events */
	int16_t pad0;
	uint32_t val;       /* WAIT_FUTEX: sleep while *word == val */
	uint32_t *word;     /* WAIT_FUTEX: the word */
	int64_t timeout_ns; /* relative; < 0: no timeout */
	uint64_t done;      /* bytes this call moved before waiting */
};

/* fork_prepare kinds. */
enum sdpshim_fork_kind {
	SDPSHIM_FORK = 1,  /* fork(): the child runs on, without the core */
	SDPSHIM_SPAWN = 2, /* posix_spawn/posix_spawnp/vfork: the child execs */
};

struct sdpshim_eset;
struct sdpshim_eset_entry;

/* What the interposer offers the core; valid for the life of the process. */
struct sdpshim_host {
	uint32_t abi;  /* SDPSHIM_CORE_ABI of the interposer */
	uint32_t size; /* sizeof(struct sdpshim_host) */
	/* State of fd (SDPSHIM_FD_*); UNMANAGED for any fd never set. */
	int (*fd_state)(int fd);
	/* Sets the state of fd; 0, or -EBADF (fd < 0), -ENOMEM (table growth). */
	int (*fd_set_state)(int fd, int state);
	/* Make libc calls of the calling thread pass straight through. Nests. */
	void (*guard_enter)(void);
	void (*guard_leave)(void);
	/* Counts one connection that stays on kernel TCP, by reason. */
	void (*fallback_count)(int reason);
	/* Counters by reason, SDPSHIM_REASON_MAX entries, updated atomically
	 * (__atomic_fetch_add); read them with atomic loads. */
	uint64_t *fallback;
	/* Absolute paths of libsdpshim.so and of the core as loaded. */
	const char *shim_path;
	const char *core_path;
	/* 1 when this process's fork children will run a core of their own
	 * (the interposer loads a private copy in the child: preload/c/core.c),
	 * 0 when they will stay on kernel TCP (the copy could not be made). */
	int (*child_cores)(void);
	/* The direct data path (preload/c/direct.h): from now on the data calls
	 * on fd (read, write, recv, send, readv, writev, recvmsg, sendmsg) are
	 * made by the interposer over conn, a struct sdp_dconn the core owns,
	 * without entering the core, except those it answers SDPSHIM_PASS to
	 * (then the core's hook is called as before). NULL detaches. Before it
	 * frees or unmaps conn, the core sets conn->closed and waits for
	 * conn->users to drop to 0. Absent (size too small) in an older
	 * interposer: the core then serves every call itself. */
	void (*direct_attach)(int fd, void *conn);
	/* An emulated epoll set the interposer may wait on by itself
	 * (preload/c/epollfast.c): installs table, a struct sdpshim_eset the
	 * core allocated, for epfd's waits (NULL: none), and returns the table
	 * it replaced once no interposer thread reads it (the core frees it).
	 * Absent in an older interposer: every wait goes through the core. */
	struct sdpshim_eset *(*epoll_publish)(int epfd, struct sdpshim_eset *table);
	/* Marks epfd's installed table stale: the next wait goes through the
	 * core, which publishes a new one. */
	void (*epoll_stale)(int epfd);
	/* An EPOLL_CTL_MOD that leaves fd's entry one the interposer answers
	 * for (level-triggered, same data): sets the entry's events in epfd's
	 * fresh table, then wakes its sleepers when events were added, which
	 * look again. 1 when done; 0 when there is no fresh table, fd has no
	 * entry in it or its data differs (the core marks the table stale
	 * instead). Absent in an older interposer. */
	int (*epoll_update)(int epfd, int fd, uint32_t events, uint64_t data);
	/* Whether a fork (and posix_spawn, vfork) needs fork_prepare: 1 while
	 * the core holds an accelerated connection or a listener it must
	 * change for a child; 0 lets a fork skip the call (a process forking a
	 * child per connection entered the runtime at each). Until the core
	 * calls it, every fork calls fork_prepare. Absent in an older
	 * interposer: every fork does. */
	void (*fork_work)(int need);
	/* Called by fork_prepare(SDPSHIM_FORK) when it keeps connections
	 * accelerated across this fork instead of switching them (their fds
	 * are all close-on-exec): fd is the child's end of a SOCK_SEQPACKET
	 * pair whose other end, mine, the core watches. The interposer gives
	 * fd to the child (PROTECTED) and closes it in the parent once fork()
	 * returned, and closes mine in the child (so that the request fails
	 * at once when the parent is gone); in the child, the fds the parent managed wait, untouched,
	 * and the first call on one of them sends the core a request over fd
	 * to switch the kept connections to kernel TCP (with an SCM_RIGHTS
	 * pipe whose write end the core closes when done), as fork_prepare
	 * would have done. Absent in an older interposer: nothing is kept. */
	void (*fork_keep)(int fd, int mine);
	/* Makes, now, what this process's first fork would otherwise make:
	 * the copy of the core its fork children load (a few ms). Thread-safe;
	 * the core calls it off the program's threads when the process starts
	 * listening (servers fork). Absent in an older interposer. */
	void (*fork_ready)(void);
	/* Wakes every thread asleep in poll, ppoll, select or pselect over
	 * managed sockets (preload/c/pollkick.c): the core calls it after a
	 * change only this process knows of (a shutdown, a switch to kernel
	 * TCP, a verdict); each looks again. */
	void (*poll_kick)(void);
	/* Writes into fds the kick eventfds of the threads in poll and
	 * select that are bells (number SDP_DBELL_POLL + i for fds[i],
	 * preload/c/direct.h; -1: not made yet), at most max; returns how
	 * many it wrote. They stay open for the life of the process: the
	 * core gives copies to peer processes in the rendezvous. */
	int (*poll_bells)(int *fds, int max);
	/* The calling thread's bell number in poll and select (taking its
	 * slot if it has none), or 0: it has none. */
	uint32_t (*poll_bell)(void);
	/* An EPOLL_CTL_ADD of a direct socket into a set whose table is
	 * fresh: appends *entry to epfd's table in place (its token above
	 * every token there: the core draws them increasing) and wakes the
	 * set's sleepers, which look again. 1 when done; 0 when there is no
	 * fresh table, no room is left in it, or the token is not the
	 * largest (the core marks the table stale instead). Absent in an
	 * older interposer. */
	int (*epoll_append)(int epfd, const struct sdpshim_eset_entry *entry);
	/* Accepts the interposer decides alone (preload/c/plainaccept.c):
	 * an accept on a listener marked here whose connection nobody can
	 * have offered stays on kernel TCP without entering the core.
	 * accept_listener marks listener fd, identified by its SO_COOKIE
	 * (0 unmarks; a later socket with that number is not it).
	 * accept_held: how many offers the core holds, answered and not yet
	 * claimed or dropped (set before the answer goes out), or may be
	 * reading from its rendezvous socket (set before it takes a
	 * connection off it).
	 * accept_quiet: the record directory dir (the run directory's
	 * records/) was, as of its device, inode and modification time,
	 * without any deferral record, and rvfd is the core's rendezvous
	 * socket, where a committed offer waits until the core reads it
	 * (accept_held counts it from then on) (dir NULL:
	 * unknown), read when it had been unchanged for longer than any
	 * timestamp granularity. accept_plain: the accepts decided so, each
	 * also counted in fallback[] as peer-not-shimmed. Absent in an older
	 * interposer: every accept goes through the core. */
	void (*accept_listener)(int fd, uint64_t cookie);
	void (*accept_held)(uint32_t n);
	void (*accept_quiet)(const char *dir, uint64_t dev, uint64_t ino, int64_t mtime_sec, int64_t mtime_nsec, int rvfd);
	uint64_t *accept_plain;
	/* The short-lived rule's plain runs (preload/c/shortconn.c): the
	 * next connections to a destination that stay on kernel TCP. A
	 * destination is an address (alen 4 or 16 bytes, an IPv4-mapped one
	 * given as its IPv4 address) and a port (host order). short_run
	 * starts a run of n connections (0 ends it) and returns 1, or 0 when
	 * the table has no room for it (nothing is kept then). The core
	 * calls it under one lock: one writer at a time. short_left returns
	 * how many of the run are left. short_take takes one of them for a
	 * connect the core decides (a socket it knew before its connect): 1
	 * when there was one. A connect on a socket the core has not seen
	 * takes one without entering the core, counted in fallback[] and in
	 * short_plain (those only) as short-lived. Absent in an older
	 * interposer: the core keeps its runs itself. */
	int (*short_run)(const uint8_t *addr, uint32_t alen, uint16_t port, int32_t n);
	int (*short_left)(const uint8_t *addr, uint32_t alen, uint16_t port);
	int (*short_take)(const uint8_t *addr, uint32_t alen, uint16_t port);
	uint64_t *short_plain;
};

/* A snapshot of an emulated epoll set whose socket entries are all
 * level- or edge-triggered (no EPOLLONESHOT, EPOLLEXCLUSIVE) and which no
 * other set or poll watches. The interposer answers a wait on it alone
 * while every entry's fd carries a direct handle in its plain state;
 * otherwise, or when stale, the core does. Tokens are the data values under which the core registered its
 * own fds in the kernel's set (sorted ascending): the kernel's events
 * with those values are not the program's. */
struct sdpshim_eset_entry {
	int32_t fd;      /* the program's socket, registered in the set under a token */
	int32_t pad0;
	uint32_t events; /* what the program asked for (EPOLLIN, EPOLLOUT, EPOLLRDHUP,
			  * EPOLLET, ...); epoll_update may store it while threads
			  * read it (atomic) */
	/* EPOLLET's state, as the core's entry keeps it: an evaluation
	 * reports only an edge (a bit not in last_mask, bytes arrived beyond
	 * last_arr, a write that found no room since last_ns) and records
	 * what it found. The interposer's waits move it, the core's own
	 * waits start from theirs: the two can only report an edge twice. */
	uint32_t last_mask; /* the ready mask at the last evaluation */
	uint64_t data;      /* the program's epoll_data */
	uint64_t last_arr;  /* bytes arrived at the last evaluation */
	uint32_t last_ns;   /* writes that found no room, at the last writable evaluation */
	uint32_t ns_base;   /* such writes the core counted before the socket was direct */
	uint64_t token;      /* the core's token for the socket in the kernel's set */
	int64_t idle_since; /* the interposer's: when the waits that found it not
			     * ready began (sdp_now_ns), */
	uint32_t idle;      /* and how many in a row they are */
	uint32_t pad1;
};

struct sdpshim_eset {
	uint32_t n;        /* entries (at least one; grows by epoll_append:
			    * read it atomically) */
	uint32_t ntok;     /* tokens (the same) */
	uint32_t cap;      /* entries ent and parked have room for; tok and
			    * tokent have room for cap - n more tokens (an
			    * appended entry brings one) */
	uint32_t users;    /* interposer threads reading the table */
	uint32_t stale;    /* 1: wait through the core */
	uint32_t rot;      /* where the next scan starts (fairness; racy is fine) */
	uint32_t sleepers; /* interposer threads in the kernel's wait on the set */
	int32_t kick_efd;  /* the core's eventfd in the set (under a token):
			    * epoll_stale writes it when a thread sleeps, so
			    * that the sleeper hands its wait to the core */
	uint32_t gen;      /* moves at every epoll_update: a thread that
			    * scanned under an older one does not sleep on it */
	uint32_t bell;     /* the number of kick_efd among the process's bells
			    * (direct.h; 0: none): the entries arm with it */
	struct sdpshim_eset_entry *ent;
	uint64_t *tok;
	uint32_t *tokent;  /* per token: 1 + the index of its entry, or 0 */
	uint64_t *parked;  /* the interposer's: a bit per entry, (cap + 63) / 64
			    * words, zero from the core: 1 while the entry is
			    * parked (epollfast.c) */
};

/*
 * Core entry points, as X(return type, name without the sdpshim_core_
 * prefix, parameter list). Each is exported by libsdpshim-core.so as
 * sdpshim_core_<name>. All are required.
 *
 * init(host, envp)
 *     First call, once, before any other. envp is the environment at load
 *     time (read-only). Returns 0 to run, a positive reason code (below
 *     SDPSHIM_REASON_MAX, e.g. 10 for a bad setting) to stay off: the
 *     interposer then counts every TCP socket under that code and never
 *     calls the core again. -errno on failure (SDPSHIM_REASON_CORE_FAILED).
 * socket(fd, domain, type, protocol)
 *     A TCP socket (AF_INET/AF_INET6, SOCK_STREAM, protocol 0 or IPPROTO_TCP)
 *     was created, and its first call that needs the core is about to be
 *     made (the interposer keeps it to itself until then: shim.h,
 *     SDP_FD_UNSEEN); type carries SOCK_NONBLOCK as the socket is now, and
 *     the options the kernel took meanwhile are on the socket. Once per
 *     socket. Returns the state to record for fd, normally CANDIDATE, or
 *     UNMANAGED to leave it alone.
 * bind(fd, addr, len), listen(fd, backlog)
 *     Before the call; SDPSHIM_PASS to let the interposer make it.
 * accept(lfd, fd, peer, peerlen, flags)
 *     The interposer has accepted fd on listener lfd (accept/accept4, flags
 *     as given to accept4); peer is the peer address (read-only). Returns
 *     the state to record for fd (MANAGED when matched with a rendezvous).
 * connect(fd, addr, len, w)
 *     SDPSHIM_PASS, 0, -errno (e.g. -EINPROGRESS), or SDPSHIM_WAIT.
 * recv(fd, buf, len, flags, w), send(fd, buf, len, flags, w)
 *     read/recv/recvfrom/__read_chk/... and write/send/sendto without an
 *     address. recvfrom's address length is set to 0 by the interposer, as
 *     the kernel does for TCP.
 * recvmsg(fd, msg, flags, w), sendmsg(fd, msg, flags, w)
 *     recvmsg/readv/recvmmsg (one message per call) and sendmsg/writev/
 *     sendmmsg/sendto with an address. recvmsg sets msg_flags,
 *     msg_controllen and msg_namelen (0 for TCP) as the kernel does.
 * sendfile(out_fd, in_fd, offset, count, w)
 * splice(fd_in, off_in, fd_out, off_out, len, flags, w)
 *     Either fd CANDIDATE or MANAGED.
 * shutdown(fd, how)
 *     SDPSHIM_PASS, 0 or -errno.
 * close(fd)
 *     fd is being released (close, close_range, closefrom, or replaced by
 *     dup2/dup3 onto it). The kernel fd is still open; the core must not
 *     close it: the interposer does right after. The state becomes
 *     UNMANAGED.
 * dup(oldfd, newfd)
 *     newfd now refers to the same socket (dup, dup2, dup3, F_DUPFD,
 *     F_DUPFD_CLOEXEC). Returns the state to record for newfd.
 * evict(fd)
 *     The program wants fd (PROTECTED) as a dup2/dup3 target. Returns 0 when
 *     the core moved its resource off fd and set fd UNMANAGED, else -errno
 *     (the program's call fails with EBUSY).
 * nonblock(fd, on)
 *     O_NONBLOCK changed (fcntl F_SETFL, ioctl FIONBIO), after the kernel
 *     call succeeded.
 * ioctl(fd, request, arg)
 *     Any ioctl but FIONBIO (FIONREAD/SIOCINQ, SIOCOUTQ, ...).
 * getsockopt(fd, level, name, val, len), setsockopt(fd, level, name, val, len)
 *     SDPSHIM_PASS, 0 or -errno.
 * poll(fds, nfds, wait, wcap, nwait, timeout_ns)
 *     poll/ppoll/select/pselect over a set with MANAGED fds. fds is the
 *     caller's whole set with every revents zeroed; the core sets revents of
 *     the MANAGED entries only and returns how many it set non-zero (no
 *     sleeping beyond its spin budget, which ends early when a kernel entry
 *     is ready and lasts at most timeout_ns: < 0 no bound, 0 no polling). It appends up to wcap pollfds to
 *     sleep on to wait[] and sets *nwait (wcap >= 2 * MANAGED entries + 1).
 *     The interposer then ppoll()s the kernel entries plus wait[] with the
 *     caller's timeout and sigmask (timeout 0 when something is ready), and
 *     calls poll again after a wake-up that readied no kernel entry.
 *     SDPSHIM_PASS: the interposer polls the whole set in the kernel.
 * claim(fd)
 *     poll/select over a set holding fd, CANDIDATE, in a process that may
 *     hold deferred connections: if fd is a connection whose acceptance waits
 *     for its first use, this is it (the core claims it, waiting as a data
 *     call would). Returns fd's state now (MANAGED when accelerated).
 * accept_nofd()
 *     accept() on a CANDIDATE or MANAGED listener failed with EMFILE or
 *     ENFILE: the core gives back the fds that offers waiting for their
 *     accept hold (their connections stay on kernel TCP) and returns how
 *     many; > 0: the interposer tries the accept once more.
 * epoll_ctl(epfd, op, fd, ev)
 *     epfd or fd is CANDIDATE/MANAGED. SDPSHIM_PASS, 0 or -errno. The core
 *     marks epfd MANAGED when its epoll_wait needs emulating.
 * epoll_wait(epfd, ev, maxevents, nkernel, timeout_ns)
 *     epfd is MANAGED. nkernel < 0: before sleeping; return the number of
 *     ready events written to ev (> 0), 0 to let the interposer sleep in the
 *     kernel epoll_pwait on epfd, or -errno. With nkernel = -1 the core may
 *     poll for its wait policy's budget first, for at most timeout_ns (the
 *     program's time left; < 0: no bound). nkernel >= 0: the kernel
 *     returned nkernel events in ev; rewrite them (doorbells to socket
 *     events) and return the final count; 0 sends the interposer back to
 *     sleep for the rest of the timeout. SDPSHIM_PASS: a kernel epoll_wait.
 *     A 0 answer to nkernel < 0 arms the set (events then write its
 *     eventfd); a thread that leaves the wait without events (timeout,
 *     EINTR) calls once more with nkernel = SDPSHIM_EPOLL_DISARM (-3),
 *     whose result is ignored, to disarm it.
 * pass(fd)
 *     fd (MANAGED) is in an SCM_RIGHTS message about to be sent: the process
 *     that receives it could not reach the stream, which lives in this one.
 *     The core makes the connection plain kernel TCP first (as fork_prepare
 *     does for a child; bounded the same way), so both processes share the
 *     kernel socket as they would without the shim.
 * fork_prepare(kind)
 *     Before fork()/posix_spawn()/vfork(), in the parent, unless the core
 *     said through host->fork_work that forks need nothing. It may block
 *     (bounded, a few seconds at worst) while it switches inherited
 *     connections to kernel TCP with their peers, except those it keeps
 *     accelerated for a fork() child through host->fork_keep (switched
 *     only when the child first uses one of the parent's fds). Nothing is
 *     called in the parent after the fork: each call into the runtime there made the
 *     fork slower (its writes copy pages the child still shares).
 * exit_drain()
 *     _exit()/_Exit() of the process that runs the core, on a thread not
 *     inside the core: the accelerated streams send what they hold and
 *     their FINs (bounded, as at exit()), which the kernel would deliver
 *     for a plain socket after the process is gone. Nothing in a fork
 *     child that runs no core of its own, nor twice.
 * fork_child()
 *     In a fork() child, before fork() returns. Written in C inside the core
 *     library and async-signal-safe: the child must never enter the old Go
 *     runtime (it hangs). fork_prepare(SDPSHIM_FORK) has switched every
 *     inherited accelerated connection to kernel TCP (with the peer, no
 *     byte lost), or kept them (host->fork_keep); fork_prepare(
 *     SDPSHIM_SPAWN), also called around vfork, those with an fd an exec
 *     keeps. Afterwards the interposer sets every remaining non-UNMANAGED
 *     fd UNMANAGED (after the kept ones were switched, when there are
 *     some) and never calls the core again in that process.
 */
#define SDPSHIM_CORE_ENTRY_POINTS(X)                                                       \
	X(int, init, (struct sdpshim_host * host, char **envp))                               \
	X(int, socket, (int fd, int domain, int type, int protocol))                          \
	X(int, bind, (int fd, struct sockaddr *addr, socklen_t len))                          \
	X(int, listen, (int fd, int backlog))                                                  \
	X(int, accept, (int lfd, int fd, struct sockaddr *peer, socklen_t peerlen, int flags)) \
	X(int, connect, (int fd, struct sockaddr *addr, socklen_t len, struct sdpshim_wait *w)) \
	X(ssize_t, recv, (int fd, void *buf, size_t len, int flags, struct sdpshim_wait *w))  \
	X(ssize_t, send, (int fd, void *buf, size_t len, int flags, struct sdpshim_wait *w))  \
	X(ssize_t, recvmsg, (int fd, struct msghdr *msg, int flags, struct sdpshim_wait *w))  \
	X(ssize_t, sendmsg, (int fd, struct msghdr *msg, int flags, struct sdpshim_wait *w))  \
	X(ssize_t, sendfile,                                                                   \
	  (int out_fd, int in_fd, off_t *offset, size_t count, struct sdpshim_wait *w))        \
	X(ssize_t, splice,                                                                     \
	  (int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,                 \
	   unsigned int flags, struct sdpshim_wait *w))                                        \
	X(int, shutdown, (int fd, int how))                                                    \
	X(void, close, (int fd))                                                               \
	X(int, dup, (int oldfd, int newfd))                                                    \
	X(int, evict, (int fd))                                                                \
	X(void, nonblock, (int fd, int on))                                                    \
	X(int, ioctl, (int fd, unsigned long request, void *arg))                              \
	X(int, getsockopt, (int fd, int level, int name, void *val, socklen_t *len))          \
	X(int, setsockopt, (int fd, int level, int name, void *val, socklen_t len))           \
	X(int, poll,                                                                           \
	  (struct pollfd * fds, nfds_t nfds, struct pollfd *wait, nfds_t wcap, nfds_t *nwait, int64_t timeout_ns)) \
	X(int, claim, (int fd))                                                                \
	X(int, accept_nofd, (void))                                                            \
	X(int, epoll_ctl, (int epfd, int op, int fd, struct epoll_event *ev))                  \
	X(int, epoll_wait, (int epfd, struct epoll_event *ev, int maxevents, int nkernel, int64_t timeout_ns)) \
	X(void, pass, (int fd))                                                                \
	X(void, fork_prepare, (int kind))                                                      \
	X(void, fork_child, (void))                                                            \
	X(void, exit_drain, (void))

/* Function types: sdpshim_core_<name>_fn. */
#define SDPSHIM_CORE_TYPEDEF_(ret, name, params) typedef ret sdpshim_core_##name##_fn params;
SDPSHIM_CORE_ENTRY_POINTS(SDPSHIM_CORE_TYPEDEF_)
#undef SDPSHIM_CORE_TYPEDEF_

/* epoll_wait's nkernel for a thread leaving its wait without events. */
#define SDPSHIM_EPOLL_DISARM (-3)

/* Prototypes, for a C implementation of the core (tests, the fork_child
 * hook); the Go core relies on cgo's export header instead. */
#ifdef SDPSHIM_CORE_PROTOTYPES
#define SDPSHIM_CORE_PROTO_(ret, name, params) ret sdpshim_core_##name params;
SDPSHIM_CORE_ENTRY_POINTS(SDPSHIM_CORE_PROTO_)
#undef SDPSHIM_CORE_PROTO_
#endif

#ifdef __cplusplus
}
#endif

#endif /* SDPSHIM_CORE_H */
