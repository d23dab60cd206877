/*
 * direct.h - the direct data path: the bytes of one accelerated connection
 * move through a mapping both processes share, copied by the application's
 * own threads, and a sleeper is woken by the peer's thread with one system
 * call. No goroutine, queue or emulated NIC sits between a send and the
 * recv that takes its bytes. docs/direct.md has the protocol and the
 * argument for its ordering; tools/model/direct.pml model-checks it.
 *
 * The area (struct sdp_darea) is created and initialised by the Go core,
 * passed to the peer as a memfd, and mapped MAP_SHARED by both. It holds
 * two directions; side 0 sends on dir[0] and receives on dir[1], side 1
 * the other way round. Each direction is a status-byte block channel
 * (seed 000): N blocks of S bytes in the receiver's landing memory, each
 * with a status byte (0 empty, 1 data, 2 retained, 3 and 4 claimed for a
 * copy, below). The sender fills a block, header first, and publishes it
 * by writing its status byte last (or appends to the block it published
 * last while the receiver has not begun it);
 * it learns which blocks are free by reading the status bytes (the
 * one-sided status READ of the RDMA version), so the receiver sends no
 * acknowledgements and keeps no per-sender state. A block the receiver
 * retains (status 2) is skipped by the sender.
 *
 * All cursors live in the area, not in process memory, so a fork child
 * that inherits the fd goes on where its parent was, as it would with a
 * kernel socket. The peer can write anything into the area: every value
 * read from it is validated or reduced modulo N before use, and a
 * violation resets the connection (SDP_DERR_PROTO); it can never make
 * this process read or write outside the area, crash, or spin unbounded.
 *
 * Everything here is async-signal-safe and makes raw system calls only
 * (futex, send and recv on the connection's kernel socket, sched_yield,
 * getpid/kill, sched_get/
 * setaffinity; clock_gettime and sched_getcpu read the vDSO and the
 * restartable-sequence area), so it runs in
 * the interposer, in a fork child that has no Go runtime, and in tests.
 */
#ifndef SDPSHIM_DIRECT_H
#define SDPSHIM_DIRECT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SDP_DAREA_MAGIC 0x44504453u /* "SDPD" little-endian */
#define SDP_DAREA_VERSION 3u /* 2: the woken words; 3: the link in the flags, tx_tail */
#define SDP_DLINE 64 /* cache line: words of different writers never share one */

/* Status byte values. READING and FILLING are held for one copy, under
 * the side lock of the one who set them: the receiver claims a data block
 * while it copies out of it (DATA -> READING -> EMPTY, or DATA again when
 * bytes are left), the sender while it appends to the last block it
 * published, which nobody has begun to read (DATA -> FILLING -> DATA). So a
 * stream of small sends shares blocks: the ring holds N blocks of bytes,
 * not N sends, as a kernel socket buffer holds many small writes. */
enum { SDP_DBLK_EMPTY = 0, SDP_DBLK_DATA = 1, SDP_DBLK_RETAINED = 2, SDP_DBLK_READING = 3, SDP_DBLK_FILLING = 4 };

/* One spin of a polling loop: the CPU's pause hint. */
static inline void sdp_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* A yield that took longer than this gave the core to another thread. */
#define SDP_YIELD_RAN_OTHER_NS 4000

/* Poll *k (from 1) of a budgeted spin, the one every wait uses (recv,
 * send, poll, select, epoll): the pause hint, and on every 128th poll a
 * yield of the core. A yield that gave the core to another thread (more
 * threads want to run than there are cores) moves *k on to the poll
 * before the next 128th: the next poll yields again. So while others
 * want the core a spin polls once per yield, handing the core to them
 * between looks instead of taking 127 polls of their time, and each such
 * yield spends 128 polls of the budget. A yield that finds nobody else to
 * run returns at once, and 127 pause hints follow. */
void sdp_spin_yield(uint32_t *k);

/* How long a waiter for a side lock sleeps before it asks whether the
 * holder is alive; 25 such sleeps with the same live holder give up (a
 * violation). 200 ms: a hostile peer that writes a live pid into a lock
 * word costs a call 5 s, then the connection resets. Tests that drive a
 * hostile peer at speed (FuzzArea) shorten it. */
extern long sdp_dlock_round_ns;

/* Monotonic clock in ns (vDSO, no system call): the one clock of the
 * protocol and the interposer. */
int64_t sdp_now_ns(void);
/* This process's pid, asked of the kernel once per process (a fork child
 * asks again). */
uint32_t sdp_dconn_pid(void);
static inline void sdp_spin_step(uint32_t *k)
{
	if ((*k & 127) != 0)
		sdp_cpu_relax();
	else
		sdp_spin_yield(k);
}

/* The program's TCP_NODELAY and TCP_CORK while the kernel socket beside
 * an area needs its own (shim/tcpopts.go): a ring (below) must go at
 * once, and Nagle's algorithm would hold it for the peer's delayed ACK
 * (40 ms), a cork for 200 ms. Held, the socket has TCP_NODELAY on and
 * TCP_CORK off, the program's settings are kept here (its getsockopt
 * reads them, its setsockopt writes them here), and they go back on the
 * socket at release. Memory of the core's (a socket's), which a handle
 * names (sdp_dconn.opts) so that its first ring on the socket holds them:
 * a connection whose peer never needs a socket ring costs no system call
 * for it. */
struct sdp_tcpopts {
	uint32_t lock; /* a side lock (direct.c): the core's calls against a ring's hold */
	uint32_t state; /* SDP_TCPOPTS_* */
	int32_t nodelay, cork;
};
#define SDP_TCPOPTS_PROGRAM 0 /* the program's settings are on the socket */
#define SDP_TCPOPTS_HELD 1    /* kept here */
#define SDP_TCPOPTS_GONE 2    /* put back for good (the connection is plain): no hold again */
/* Holds them (a no-op once held or gone). */
void sdp_tcpopts_hold(struct sdp_tcpopts *o, int fd);
/* 1 and *v while held (name TCP_NODELAY or TCP_CORK), else 0: the
 * socket's own applies. */
int sdp_tcpopts_get(struct sdp_tcpopts *o, int name, int *v);
/* 1 when held (kept here, as the kernel stores it: a non-zero
 * TCP_NODELAY is 1), else 0: for the socket. */
int sdp_tcpopts_set(struct sdp_tcpopts *o, int name, int v);
/* Puts them back on the socket fd, for good. */
void sdp_tcpopts_release(struct sdp_tcpopts *o, int fd);

/* Every block starts with this header; the payload follows. */
struct sdp_dblk {
	uint32_t stream; /* the area's stream id */
	uint32_t seq;    /* per-direction block number, from 0 */
	uint32_t len;    /* payload bytes, <= block size - header */
	uint32_t flags;  /* 0, or SDP_DBLK_NEXT and the next block's position; any other bit is a violation */
};

/* sdp_dblk.flags: the block the receiver reads after this one is the one
 * at SDP_DBLK_NEXT_POS (reduced modulo N), not the next in the ring. The
 * sender links each block it fills to the lowest free block (direct.c,
 * link_of), so that a connection's memory follows what it has in flight,
 * as a kernel socket's buffer does. */
#define SDP_DBLK_NEXT 1u
#define SDP_DBLK_NEXT_POS(f) ((f) >> 16)

/* One direction: the words its sender writes, the words its receiver
 * writes, and the sleep announcements, each group on its own lines. */
struct sdp_ddir {
	/* Written by the sender (and by whoever ends the connection). */
	_Alignas(SDP_DLINE) uint32_t tx_next; /* next block index to fill (free-running) */
	uint32_t tx_seq;                      /* seq of the next block */
	uint32_t tx_lock;                     /* senders of this side serialise on it */
	uint32_t fin;                         /* 1: no block after fin_seq (shutdown SHUT_WR, close) */
	uint32_t fin_seq;                     /* tx_seq at the FIN */
	uint32_t reset;                       /* 1: the sender aborted (RST): the receiver gets ECONNRESET */
	uint64_t tx_bytes;                    /* bytes published, for stats */
	uint32_t cpu;                         /* 1 + the CPU this side's last waiting thread ran on; 0: not known (direct.c, spreading) */
	uint32_t switched;                    /* 1: this side went to kernel TCP (shim/forkswitch.go); a fork child sharing it goes too */
	uint32_t switch_req;                  /* 1: this side asks for a switch to kernel TCP (its REQ follows on the socket) */
	uint32_t watch_holds;                 /* 1: this side holds the peer process's watcher bell (bell 0) */
	uint32_t watch_wants;                 /* 1: this side's watcher waits for the urgent byte until the peer holds its bell */
	uint32_t tx_tail;                     /* the block filled last (free-running): appends go there */
	/* Written by the receiver. */
	_Alignas(SDP_DLINE) uint32_t rx_next; /* next block index to read (free-running) */
	uint32_t rx_seq;                      /* seq expected there */
	uint32_t rx_off;                      /* bytes already taken from that block */
	uint32_t rx_lock;                     /* receivers of this side serialise on it */
	uint32_t rx_closed;                   /* 1: the receiving end is closed: sends fail with EPIPE */
	uint32_t rx_window;                   /* > 0: the receiver's SO_RCVBUF: bytes it may hold unread */
	uint64_t rx_bytes; /* bytes consumed, for stats */
	/* The receiver waiting for data: sleepers announced, futex word. */
	_Alignas(SDP_DLINE) uint32_t data_sleepers;
	uint32_t data_word;
	uint32_t data_armed; /* 1: ring the receiver's socket on the next publish */
	uint32_t data_woken; /* 1: the sleepers were woken since the last announced (direct.c, wakes) */
	/* The sender waiting for space. */
	_Alignas(SDP_DLINE) uint32_t space_sleepers;
	uint32_t space_word;
	uint32_t space_armed; /* 1: ring the sender's socket on the next release */
	uint32_t space_woken;
};

/* The area: a header, two directions, then for each direction its status
 * bytes (rounded up to a line) and its blocks. */
struct sdp_darea {
	uint32_t magic, version;
	uint32_t nblocks;    /* N, a power of two, 1..65536 */
	uint32_t block_size; /* S, a multiple of 64, > header, <= 1 MiB */
	uint32_t stream;     /* the stream id both sides put in their headers */
	uint32_t released;   /* bit i: side i's process let its handle go (reuse: shim/areapool.go) */
	uint32_t pad[2];
	uint64_t size; /* bytes of the whole area */
	struct sdp_ddir dir[2];
};

/* Bytes an area of n blocks of s bytes needs. */
size_t sdp_darea_size(uint32_t n, uint32_t s);
/* Writes a fresh area into mem (size bytes, zeroed or not: an area used
 * before is fresh again, its header and both directions' status bytes
 * cleared). 0, or -EINVAL when n, s or size do not fit the rules above. */
int sdp_darea_init(void *mem, size_t size, uint32_t n, uint32_t s, uint32_t stream);
/* Marks side's process done with the area at mem (no handle of it is
 * left): the process that made it may give it to a later connection
 * between the same two processes. Returns the bits set before (the other
 * side's set: this side let go last). */
uint32_t sdp_darea_release(void *mem, int side);
/* Whether side's process marked the area released. */
int sdp_darea_released(const void *mem, int side);
/* Bytes the area's two directions published (the peer writes one of the
 * counts: a hint, never trusted for memory safety). */
uint64_t sdp_darea_moved(const void *mem);

/* Bells: the eventfds of a process's sleepers (its epoll sets' kick
 * eventfds, numbered 1..SDP_DBELL_POLL-1 by the core; the kick eventfds
 * of its threads in poll and select, the last SDP_DBELLS_POLL numbers, by
 * their slot in the interposer) and of its switch watcher (number 0),
 * of which each peer process holds copies (passed in the rendezvous, one
 * table per peer process, not per connection). A sleeper arms with its
 * bell's number, and the peer writes the bell (an eventfd write) rather
 * than ringing the socket, when it holds that bell. */
#define SDP_DBELLS 64
#define SDP_DBELLS_POLL 16
/* Bell 0 is the switch watcher's (shim/switchwatch.go): a peer that asks
 * for a switch to kernel TCP writes it (sdp_dconn_ring_watcher); no sleeper
 * arms with it. */
#define SDP_DBELL_WATCHER 0
#define SDP_DBELL_POLL (SDP_DBELLS - SDP_DBELLS_POLL) /* the first poll thread's number */
struct sdp_dbells {
	int32_t fd[SDP_DBELLS]; /* this process's copy of the peer's bell n, or -1 */
};

/* One process's handle on one side of an area. Private memory; a fork
 * child shares the area and copies the handle. */
struct sdp_dconn {
	struct sdp_darea *a;
	size_t size;
	int side;       /* 0 or 1 */
	uint32_t n, s;  /* validated copies of the header's geometry */
	uint32_t stream;
	/* Rings (sdp_dconn_arm): the kernel TCP socket beside the area
	 * carries nothing else until a switch to kernel TCP, so a ring of the
	 * peer's armed poll or epoll sleep is one zero byte sent on this
	 * process's socket, which makes the peer's socket readable. */
	int ring_fd;        /* this process's socket of the connection, or -1: no ring (sdp_dconn_set_ring) */
	uint32_t ringers;   /* threads between their look at ring_fd and their send (or watch add) */
	/* The switch watcher's registration of the socket (shim/switchwatch.go),
	 * made by the first sleep rather than at the start (sdp_dconn_watch_later). */
	uint32_t watch;     /* SDP_DWATCH_* */
	int watch_epfd;     /* the watcher's epoll set */
	uint64_t watch_id;  /* the socket's id in it */
	uint32_t drain_lock; /* one drain at a time (sdp_dconn_drain) */
	uint32_t nodrain;   /* 1: the socket's bytes are the switch's (sdp_dconn_quiet) */
	uint32_t arms;      /* arms this side made: at most as many rings arrive (lazy drain) */
	uint32_t drained_at; /* arms at the last drain */
	uint32_t npush;     /* bytes a drain read that were no ring (the start of a switch record) */
	uint8_t push[64];
	struct sdp_dbells *bells; /* the peer process's bells this process holds, or NULL (set by the core) */
	struct sdp_tcpopts *opts; /* the socket's options a socket ring holds first, or NULL (set by the core
				   * before ring_fd; the core's memory while the ring may go: sdp_dconn_set_ring) */
	uint32_t budget; /* polls before a sleep (adaptive, below) */
	uint32_t poll_min, poll_max;
	uint32_t granted, grant_every, wakes_seen; /* the wake grant (direct.c) */
	uint32_t broken; /* SDP_DERR_* once this side saw a violation */
	/* Counters (this process only). */
	uint64_t polls_hit, sleeps, wakes_sent, evwakes_sent, violations;
	uint64_t socket_rings;         /* rings of a peer sleeper sent over the socket: its bell not held here */
	uint64_t sent, received;       /* bytes the program moved */
	uint64_t nospace;              /* sends that found no room (EPOLLET's writable edge) */
	uint32_t nospace_arm;          /* 1 + the bell a nonblocking send that finds no room arms the room with
					* (sdp_dconn_want_nospace); 0: none asked, nothing armed */
	uint64_t send_calls, recv_calls;
	uint64_t moves;                /* waits that moved their thread off the peer's CPU (spreading) */
	uint32_t shared_cpu;           /* consecutive yields that found the peer on this thread's CPU */
	int64_t moved_ns;              /* when a wait on this handle last moved its thread */

	/* The socket around it, as the interposer needs it (set by the Go
	 * core with atomic stores, read with atomic loads). */
	uint32_t users;     /* threads inside a data call (the core unmaps only at 0) */
	uint32_t sleeping;  /* this process's announced sleepers on the area's words (announce to
			     * withdraw): what sdp_dconn_wake_mine reads, which the peer cannot
			     * write, unlike the area's counts */
	uint32_t closed;    /* the core detached it: calls go to the core */
	uint32_t nonblock;  /* O_NONBLOCK */
	uint32_t slow;      /* SDP_DSLOW_*: the core takes these calls itself */
	uint32_t inherited; /* 1: a fork child's copy of its parent's handle, going on over the area
			     * (preload/c/forkkeep.c): its sleepers arm with the socket ring, and it
			     * writes no bell (the numbers are the parent's); beside slow, which
			     * every data call reads with it */
	int64_t rcvtimeo;   /* SO_RCVTIMEO, ns, 0: none */
	int64_t sndtimeo;   /* SO_SNDTIMEO */
	uint32_t errseen;   /* ECONNRESET reported once: reads EOF, writes EPIPE after */
	uint32_t closed_told; /* the first send after the peer closed its reading was taken (as the kernel's, which the peer answers with a reset) */
	uint64_t cookie;    /* the core's, for its own lookups */

	/* Preemption (direct.c): small messages before bulk on a shared CPU.
	 * At the end: the fields above keep their offsets. */
	uint32_t preempt;    /* 1: blocking bulk sends pause while small messages starve (SDPSHIM_PREEMPT) */
	uint32_t small_hist; /* the last two receives, bit 0 the latest: 1 asked for less than a block */
	int64_t copy_ns;     /* time bulk sends spent copying since the last scheduling point (while starved) */
	int64_t copy_bytes;  /* and the bytes they copied */
	uint64_t pauses;     /* bulk sends that paused for starving small messages, or waited for a turn */

	/* The tenant gate (tenant.c), set by the Go core (sdp_dconn_open: none). */
	int32_t board_fd;   /* the user's board (tenant.h), or -1: none */
	uint32_t board_pid; /* the process given board_fd: a fork child's copy of the handle has none */
	uint32_t turn;      /* 1 + the turn this handle held last; 0: none */

	/* Trimming (sdp_dconn_trim), the trim's own: the sender's seq when
	 * it last left no block in flight, and at its last look. */
	uint32_t trim_seq;    /* tx_seq after the last trim that left every block free */
	uint32_t trim_mark;   /* tx_seq at the last look */
	uint32_t trim_looked; /* 1: trim_mark holds a look */
	uint64_t trimmed;     /* bytes of pages given back */
};

/* sdp_dconn.slow bits. */
#define SDP_DSLOW_RECV 1
#define SDP_DSLOW_SEND 2

/* Errors beyond -errno. */
#define SDP_DERR_PROTO 1 /* the peer broke the protocol */

/* Opens side (0/1) of the area mapped at mem (size bytes): validates the
 * header against size. 0 or -EINVAL. No ring goes out until
 * sdp_dconn_set_ring names the socket. */
int sdp_dconn_open(struct sdp_dconn *c, void *mem, size_t size, int side);

/* Names the socket rings go out on (-1: none) and returns once no thread
 * can still send on the old one: the caller may then close it, or write
 * its own records on the socket. */
void sdp_dconn_set_ring(struct sdp_dconn *c, int fd);
/* The switch watcher's registration (sdp_dconn.watch). The watcher wakes
 * on the end of the TCP connection beside the area: the peer process died
 * (or dropped its socket without the area's end), and a thread asleep on
 * the area would sleep on. Registered at the start, every connection's
 * peer woke the watcher (a thread of the runtime) with the FIN of its
 * close, and paid an epoll_ctl at each end. So the registration waits for
 * a sleep that needs it: a poll or epoll arm, a sleep of the core's, and a
 * program's blocking call whose first sleep on the connection lasted
 * SDP_DWATCH_FIRST_NS (directio.c); and for the core's once-a-second pass,
 * which registers the connections that lived through one. A sleeper may
 * add it before or after its announcement: an end already there fires at
 * the add, and the watcher's mark of it wakes the announced sleepers.
 * What the first sleep's bound costs: a peer that died (or dropped its
 * socket) while a young connection's first blocking call slept is seen
 * that much later. What it saves: the normal close's FIN, which comes
 * before the area's end, finds no watcher to wake at the other end of a
 * connection whose program waited in a blocking read for that end. */
#define SDP_DWATCH_FIRST_NS 10000000LL
#define SDP_DWATCH_NONE 0  /* not registered lazily (the core registered it, or nobody) */
#define SDP_DWATCH_LATER 1 /* to be added by the first sleep */
#define SDP_DWATCH_ADDED 2 /* added */
/* Has the first sleep add the socket to the watcher's set epfd with id
 * (EPOLLRDHUP, one-shot). 0 when it was added already (the caller arms it
 * again itself). */
int sdp_dconn_watch_later(struct sdp_dconn *c, int epfd, uint64_t id);
/* Adds the socket now if it waits for its first sleep. */
void sdp_dconn_watch_now(struct sdp_dconn *c);
/* Ends the lazy registration: 1 when the socket was added (the caller
 * removes it), 0 when it never was. */
int sdp_dconn_watch_take(struct sdp_dconn *c);
/* Reads the rings that arrived on this side's socket fd. 0: done, or
 * another thread is draining; 1: a byte that is no ring came (the peer
 * began a switch to kernel TCP: sdp_dconn_pushback has what was read of
 * its record, and the socket is the core's to answer); 2: the socket is
 * the switch's now (sdp_dconn_quiet). */
int sdp_dconn_drain(struct sdp_dconn *c, int fd);
/* Whether enough arms were made since the last drain that the rings
 * should be read (an edge-triggered sleeper reads them rarely). */
int sdp_dconn_drain_due(const struct sdp_dconn *c);
/* The switch to kernel TCP owns the socket from now on: no ring goes
 * out and no drain reads, once this returns. */
void sdp_dconn_quiet(struct sdp_dconn *c);
/* Copies out (up to max) the bytes a drain read that were no ring, after
 * sdp_dconn_quiet; returns how many. */
size_t sdp_dconn_pushback(struct sdp_dconn *c, uint8_t *buf, size_t max);

/* Flags of the data calls (the socket's MSG_* are mapped onto these). */
#define SDP_D_NONBLOCK 1 /* never sleep: -EAGAIN */
#define SDP_D_PEEK 2     /* recv: copy without consuming */
#define SDP_D_WAITALL 4  /* recv: block until len bytes, EOF or an error */

/* How to sleep after a call answered SDP_D_WAIT: FUTEX_WAIT on word while
 * it holds val. After the sleep (or a signal) the caller calls
 * sdp_dconn_woke() once, then the data call again. */
struct sdp_dsleep {
	uint32_t *word;
	uint32_t val;
	int what; /* 0: data (recv), 1: space (send) */
};
#define SDP_D_WAIT (-0x10001) /* the same value as SDPSHIM_WAIT */

/* sdp_dconn_send copies up to len bytes of buf into free blocks and
 * publishes them; returns the bytes moved (> 0), -EAGAIN (NONBLOCK, no free
 * block), SDP_D_WAIT (announced; sleep as *sl says), -EPIPE (this side
 * shut down its writing, or the peer closed its reading end), -ECONNRESET
 * (the peer reset, or broke the protocol). A blocking call moves what fits
 * and returns it; the caller calls again for the rest. */
long sdp_dconn_send(struct sdp_dconn *c, const void *buf, size_t len, int flags, struct sdp_dsleep *sl);
/* sdp_dconn_recv copies up to len bytes out (consuming them unless PEEK);
 * returns the bytes (> 0), 0 at EOF (the peer's FIN, all bytes before it
 * read), -EAGAIN, SDP_D_WAIT, -ECONNRESET. WAITALL keeps reading until
 * len (the caller adds the partial counts up across waits). */
long sdp_dconn_recv(struct sdp_dconn *c, void *buf, size_t len, int flags, struct sdp_dsleep *sl);
/* The same over iovecs (writev/readv/sendmsg/recvmsg) past their first
 * skip bytes (what earlier rounds of the call moved): the bytes go into
 * (come from) the buffers in order; a send fills blocks across buffers. */
struct iovec;
long sdp_dconn_sendv(struct sdp_dconn *c, const struct iovec *iov, int cnt, size_t skip, int flags,
		     struct sdp_dsleep *sl);
long sdp_dconn_recvv(struct sdp_dconn *c, const struct iovec *iov, int cnt, size_t skip, int flags,
		     struct sdp_dsleep *sl);
/* After a sleep that a data call asked for (woken, signalled or timed
 * out): withdraws the announcement. */
void sdp_dconn_woke(struct sdp_dconn *c, const struct sdp_dsleep *sl);
/* Blocking wrappers for callers with no wait loop of their own (tests,
 * benchmarks): loop on the calls above and sleep in the kernel. */
long sdp_dconn_send_all(struct sdp_dconn *c, const void *buf, size_t len);
long sdp_dconn_recv_wait(struct sdp_dconn *c, void *buf, size_t len, int flags);

/* For a caller that sleeps by other means than a data call's answer (the
 * core's own waits): announces a sleep for data (what 0) or space (1) and
 * checks again. 1: sleep as *sl says, then sdp_dconn_woke; 0: ready now,
 * or the handle is closed (nothing announced). */
int sdp_dconn_sleep_prepare(struct sdp_dconn *c, int what, struct sdp_dsleep *sl);

/* The peer process is gone (its TCP connection ended without a FIN in
 * the area): a FIN after what it published, or a reset when it left bytes
 * of ours unread (as the kernel's close would have sent), EPIPE for later
 * sends, and every sleeper of this process on the area's words woken
 * (those in poll or epoll wake on the socket's end). */
void sdp_dconn_peer_gone(struct sdp_dconn *c);
/* Wakes every thread asleep on the area's words (they look again), this
 * process's and the peer's. */
void sdp_dconn_wake_all(struct sdp_dconn *c);
/* The same, only when a thread of this process has announced a sleep
 * (sleeping): for a caller that has just stored what such a thread's
 * check before its sleep reads (closed, an end in the area), so that a
 * later sleeper finds it and an earlier one is woken. One system call
 * per word when one sleeps, none when none does. */
void sdp_dconn_wake_mine(struct sdp_dconn *c);
/* Bytes the peer has published to this side so far (EPOLLET's edges). */
uint64_t sdp_dconn_arrived(const struct sdp_dconn *c);
/* Writes asked for and not possible so far: nonblocking sends that found
 * no room, and revents asked POLLOUT in vain (EPOLLET's writable edge). */
uint64_t sdp_dconn_nospace(const struct sdp_dconn *c);
/* An edge-triggered epoll sleeper of bell (0: none) that found c
 * writable does not arm the room (its next writable edge needs a write
 * that finds none first): from now on such a nonblocking send arms it,
 * as the kernel's SOCK_NOSPACE (two sleepers with different bells: the
 * socket ring). Sticky; returns sdp_dconn_nospace after the mark (a
 * count that moved since the sleeper's evaluation: arm the room now). */
uint64_t sdp_dconn_want_nospace(struct sdp_dconn *c, uint32_t bell);

/* shutdown(SHUT_WR): a FIN after the blocks published so far. Wakes the peer. */
void sdp_dconn_fin(struct sdp_dconn *c);
/* Abortive end (close with unread bytes, SO_LINGER 0, the peer found dead
 * from outside): the peer's calls get ECONNRESET once its data is read. */
void sdp_dconn_reset(struct sdp_dconn *c);
/* The receiving end closes: the peer's sends fail with EPIPE (the first
 * one is taken and dropped, as the kernel's is before the reset comes
 * back), and its sleepers are woken. */
void sdp_dconn_close_rx(struct sdp_dconn *c);
/* This side's connection went to kernel TCP (the fork switch): every
 * process sharing the side (a fork child, preload/c/forkkeep.c) uses the
 * kernel socket from now on. sdp_dconn_switched reports it. */
void sdp_dconn_mark_switched(struct sdp_dconn *c);
int sdp_dconn_switched(const struct sdp_dconn *c);
/* Whether this side's FIN is in the area (shutdown(SHUT_WR) or close, by
 * any process sharing the side). */
int sdp_dconn_fin_sent(const struct sdp_dconn *c);
/* Whether a switch to kernel TCP has begun on this connection, by either
 * side (requested or done): a fork child going on over the area hands its
 * calls to its parent's core from then on. */
int sdp_dconn_switching(const struct sdp_dconn *c);

/* The switch watcher's bell. Each process's watcher waits for the end of
 * its connections' TCP sockets (EPOLLRDHUP); a peer's switch request
 * also rings its watcher bell (bell 0 of the table), after marking the
 * area, so the watcher need not wait for the request's urgent byte
 * (EPOLLPRI), which the kernel's wake of a socket with new bytes wakes too:
 * every ring on the socket would wake the watcher's thread. Only while
 * the peer does not hold that bell does the watcher wait for EPOLLPRI.
 *
 * sdp_dconn_watch_holds: this side holds the peer's watcher bell now;
 * marks it, then looks: 1 when the peer's watcher asked to be rung once
 * it does (ring it). sdp_dconn_watch_urgent: whether this side's
 * watcher must wait for the urgent byte: 0 when the peer holds its bell;
 * else it asks to be rung, then looks again (Dekker with watch_holds). */
int sdp_dconn_watch_holds(struct sdp_dconn *c);
int sdp_dconn_watch_urgent(struct sdp_dconn *c);
/* Writes the peer's watcher bell; 0 when this process does not hold it. */
int sdp_dconn_ring_watcher(struct sdp_dconn *c);
/* Marks this side's switch request (before its REQ goes out), and whether
 * the peer marked one. */
void sdp_dconn_request_switch(struct sdp_dconn *c);
int sdp_dconn_switch_requested(const struct sdp_dconn *c);
/* The receiver's buffer limit (SO_RCVBUF): the peer keeps at most bytes
 * unread here (0: the whole area). Wakes the peer's sleeping senders. */
void sdp_dconn_set_window(struct sdp_dconn *c, uint32_t bytes);

/* Readiness now, as poll(2) bits: POLLIN (data or EOF), POLLOUT (a free
 * block), POLLRDHUP|POLLIN at the peer's FIN, POLLHUP when both ways
 * ended, POLLERR on reset. */
int sdp_dconn_poll(const struct sdp_dconn *c);
/* Arms event waits: the peer rings once when what events asks for
 * (POLLIN, POLLOUT) may have become ready: it writes bell (the sleeper's
 * bell number, 0: none) when it holds that bell, else it sends a zero
 * byte on its socket. Returns the readiness after arming (a non-zero
 * answer: do not sleep). The sleeper waits for its bell and for POLLIN on
 * the socket, and reads the rings (sdp_dconn_drain). Two sleepers with
 * different bells arm for the socket ring. */
int sdp_dconn_arm(struct sdp_dconn *c, int events, uint32_t bell);
/* What poll(2), select(2) and level-triggered epoll report for events on
 * a connection that has not been shut down for reading, as Linux's
 * tcp_poll: POLLIN|POLLRDNORM with bytes to read, with POLLRDHUP at EOF
 * (POLLHUP too once this side sent its FIN), POLLIN|POLLRDNORM|POLLRDHUP|
 * POLLHUP after a reset or the peer's death (POLLERR until ECONNRESET was
 * reported), POLLOUT|POLLWRNORM when a write would not block. A write
 * asked for and not possible counts in nospace (EPOLLET's writable edge).
 * Masked by events plus POLLERR|POLLHUP. */
int sdp_dconn_revents(struct sdp_dconn *c, int events);
/* The adaptive poll budget of event waits over several connections,
 * kept by one of them (seed 002's rules, as for the data waits): polls
 * before a sleep; the wait's outcome (k > 0: ready after k polls, 0:
 * it sleeps); a wake by the peer. */
uint32_t sdp_dconn_budget(const struct sdp_dconn *c);
void sdp_dconn_polled(struct sdp_dconn *c, uint32_t k);
void sdp_dconn_event_woke(struct sdp_dconn *c);
/* Bytes readable now (FIONREAD), bytes published and not yet consumed by
 * the peer (SIOCOUTQ). */
size_t sdp_dconn_inq(const struct sdp_dconn *c);
/* Gives back the pages of the blocks past the first keep that this
 * side's sender filled and the receiver has freed, once the sender
 * filled nothing since the last call: a connection that moved a burst and
 * went quiet holds its first blocks' pages again, as a kernel socket's
 * buffer shrinks as it drains. Meant to run about once a second
 * (shim/trim.go): the first call after a fill only looks. Under the send
 * lock, taken without waiting (a sender busy now is not quiet): only the
 * sender fills a block, so a free one stays free, and neither end reads
 * a free block's bytes (the receiver copied its header before it freed
 * it). Pages shared with a block in flight stay. A later fill faults its
 * pages in again, zeroed. Returns the bytes given back (MADV_REMOVE on
 * the shared memory: for both processes). */
size_t sdp_dconn_trim(struct sdp_dconn *c, uint32_t keep);
size_t sdp_dconn_outq(const struct sdp_dconn *c);

/* Preemption (direct.c) for senders that are not a handle's: the streams
 * of the shared channel, whose data the Go core moves. by names the
 * sender (any value no other sender of the process uses).
 *   - starved: a small message that by's reader waited for came late
 *     after its wait lost the CPU; marks the process (and, through the
 *     board fd given to process board_pid, the user's other processes).
 *   - point: the scheduling point before a blocking bulk write of by:
 *     reads the other processes' mark on the board (sdp_tenant_peek) and
 *     pauses while another sender's small message starved lately, for
 *     eight times the copy since the last point (*copy_ns, *copy_bytes;
 *     at most 2 ms), counting the pause in *pauses; 1 when the write's
 *     copy is to be timed and added to *copy_ns and *copy_bytes. Keeps
 *     errno. */
void sdp_preempt_starved(uintptr_t by, int board_fd, uint32_t board_pid);
/* Records in *hist (0 at first) whether a receive asking for whole bytes
 * asks for less than block (a small message); 1 when the last two did:
 * the receiver is small. */
int sdp_preempt_note(uint32_t *hist, uint64_t whole, uint64_t block);
int sdp_preempt_point(uintptr_t by, int board_fd, uint32_t board_pid, int64_t *copy_ns, int64_t *copy_bytes,
		      uint64_t *pauses);

#endif /* SDPSHIM_DIRECT_H */
