/*
 * direct.c - the direct data path (direct.h): status-byte blocks in a
 * shared area, the application's threads copying in and out, and the
 * announce / re-check / sleep, publish / look / wake protocol.
 */
#define _GNU_SOURCE 1
#include "direct.h"
#include "tenant.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/auxv.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define HDR ((uint32_t)sizeof(struct sdp_dblk))
#define LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define LOADR(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define STORER(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define FENCE() __atomic_thread_fence(__ATOMIC_SEQ_CST)

/* ---- layout ------------------------------------------------------------- */

static size_t round_line(size_t n) { return (n + SDP_DLINE - 1) & ~(size_t)(SDP_DLINE - 1); }

static size_t dir_bytes(uint32_t n, uint32_t s) { return round_line(n) + (size_t)n * s; }

size_t sdp_darea_size(uint32_t n, uint32_t s) { return round_line(sizeof(struct sdp_darea)) + 2 * dir_bytes(n, s); }

static int geometry_ok(uint32_t n, uint32_t s)
{
	return n >= 1 && n <= 65536 && (n & (n - 1)) == 0 && s > HDR && s % SDP_DLINE == 0 && s <= (1u << 20);
}

int sdp_darea_init(void *mem, size_t size, uint32_t n, uint32_t s, uint32_t stream)
{
	if (!geometry_ok(n, s) || size < sdp_darea_size(n, s))
		return -EINVAL;
	size_t hdr = round_line(sizeof(struct sdp_darea));
	memset(mem, 0, hdr); /* the header, then each direction's status bytes */
	for (int d = 0; d < 2; d++)
		memset((uint8_t *)mem + hdr + (size_t)d * dir_bytes(n, s), 0, round_line(n));
	struct sdp_darea *a = mem;
	a->magic = SDP_DAREA_MAGIC;
	a->version = SDP_DAREA_VERSION;
	a->nblocks = n;
	a->block_size = s;
	a->stream = stream;
	a->size = size;
	return 0;
}

uint32_t sdp_darea_release(void *mem, int side)
{
	return __atomic_fetch_or(&((struct sdp_darea *)mem)->released, 1u << (side & 1), __ATOMIC_ACQ_REL);
}

int sdp_darea_released(const void *mem, int side)
{
	return (LOAD(&((const struct sdp_darea *)mem)->released) >> (side & 1)) & 1;
}

uint64_t sdp_darea_moved(const void *mem)
{
	const struct sdp_darea *a = mem;
	return LOADR(&a->dir[0].tx_bytes) + LOADR(&a->dir[1].tx_bytes);
}

/* Status bytes and blocks of direction d, from the handle's validated
 * geometry (never from the area's header again). */
static uint8_t *status_of(const struct sdp_dconn *c, int d)
{
	return (uint8_t *)c->a + round_line(sizeof(struct sdp_darea)) + (size_t)d * dir_bytes(c->n, c->s);
}

static struct sdp_dblk *block_of(const struct sdp_dconn *c, int d, uint32_t idx)
{
	return (struct sdp_dblk *)(status_of(c, d) + round_line(c->n) + (size_t)(idx & (c->n - 1)) * c->s);
}

int sdp_dconn_open(struct sdp_dconn *c, void *mem, size_t size, int side)
{
	const struct sdp_darea *a = mem;
	if (size < sizeof *a || (side != 0 && side != 1))
		return -EINVAL;
	uint32_t n = LOADR(&a->nblocks), s = LOADR(&a->block_size);
	if (LOADR(&a->magic) != SDP_DAREA_MAGIC || LOADR(&a->version) != SDP_DAREA_VERSION || !geometry_ok(n, s) ||
	    size < sdp_darea_size(n, s))
		return -EINVAL;
	memset(c, 0, sizeof *c);
	c->a = mem;
	c->size = size;
	c->side = side;
	c->n = n;
	c->s = s;
	c->stream = LOADR(&a->stream);
	c->ring_fd = -1;
	c->board_fd = -1;
	c->poll_min = 16;
	c->poll_max = 4096;
	c->budget = c->poll_min;
	c->grant_every = 1;
	return 0;
}

/* ---- system calls --------------------------------------------------------- */

static long futex_wait(uint32_t *w, uint32_t v, const struct timespec *t)
{
	return syscall(SYS_futex, w, FUTEX_WAIT, v, t, NULL, 0);
}

static void futex_wake(uint32_t *w, int n) { syscall(SYS_futex, w, FUTEX_WAKE, n, NULL, NULL, 0); }

/* Writes bell n of the peer's that this process holds (an eventfd); 0
 * when it holds none by that number. */
static int write_bell(struct sdp_dconn *c, uint32_t n)
{
	struct sdp_dbells *b = __atomic_load_n(&c->bells, __ATOMIC_ACQUIRE);
	int efd = b != NULL && n < SDP_DBELLS ? __atomic_load_n(&b->fd[n], __ATOMIC_ACQUIRE) : -1;
	if (efd < 0)
		return 0;
	uint64_t one = 1;
	(void)syscall(SYS_write, efd, &one, sizeof one); /* EAGAIN at the counter's limit: readable already */
	return 1;
}

/* A ring: a write of the bell the peer's sleeper armed with, when this
 * process holds it, else one zero byte on this process's socket, which
 * makes the peer's readable (an arm's word of 1, bell 0, is the socket's).
 * ringers lets sdp_dconn_set_ring wait for a thread that read
 * the old fd (announce, then look; Dekker with set_ring's store, then
 * look). A full socket buffer (EAGAIN) cannot happen while the peer
 * drains (sdp_dconn_drain_due); a closed connection has no sleeper. */
static void ring_peer(struct sdp_dconn *c, uint32_t armed)
{
	__atomic_fetch_add(&c->ringers, 1, __ATOMIC_SEQ_CST);
	uint32_t bell = armed - 1; /* the peer wrote it: checked by write_bell */
	if (bell == SDP_DBELL_WATCHER || !write_bell(c, bell)) {
		int fd = __atomic_load_n(&c->ring_fd, __ATOMIC_SEQ_CST);
		if (fd >= 0) {
			struct sdp_tcpopts *o = __atomic_load_n(&c->opts, __ATOMIC_ACQUIRE);
			/* Once: the ring goes at once. Not a fork child's copy: its
			 * parent took them before the fork, in its own memory. */
			if (o != NULL && !LOADR(&c->inherited) &&
			    __atomic_load_n(&o->state, __ATOMIC_ACQUIRE) == SDP_TCPOPTS_PROGRAM)
				sdp_tcpopts_hold(o, fd);
			if (bell != SDP_DBELL_WATCHER)
				c->socket_rings++;
			static const char zero;
			(void)syscall(SYS_sendto, fd, &zero, 1, MSG_DONTWAIT | MSG_NOSIGNAL, NULL, 0);
		}
	}
	__atomic_fetch_sub(&c->ringers, 1, __ATOMIC_RELEASE);
}

/* getsockopt and setsockopt of an int at IPPROTO_TCP, as system calls: in
 * the core's process the libc functions are the interposer's. */
static int tcp_get(int fd, int name, int *v)
{
	socklen_t l = sizeof *v;
	return syscall(SYS_getsockopt, fd, IPPROTO_TCP, name, v, &l) == 0 ? 0 : -1;
}

static void tcp_set(int fd, int name, int v) { (void)syscall(SYS_setsockopt, fd, IPPROTO_TCP, name, &v, sizeof v); }

void sdp_dconn_set_ring(struct sdp_dconn *c, int fd)
{
	__atomic_store_n(&c->ring_fd, fd, __ATOMIC_SEQ_CST);
	for (unsigned int k = 0; __atomic_load_n(&c->ringers, __ATOMIC_SEQ_CST) != 0; k++)
		if (k > 64)
			sched_yield();
}

int sdp_dconn_watch_later(struct sdp_dconn *c, int epfd, uint64_t id)
{
	if (__atomic_load_n(&c->watch, __ATOMIC_SEQ_CST) == SDP_DWATCH_ADDED)
		return 0;
	c->watch_epfd = epfd;
	c->watch_id = id;
	__atomic_store_n(&c->watch, SDP_DWATCH_LATER, __ATOMIC_SEQ_CST);
	return 1;
}

void sdp_dconn_watch_now(struct sdp_dconn *c)
{
	/* A fork child's copy does not: the set is its parent's, and its
	 * sleeps are bounded (INHERITED_SLEEP_NS). */
	if (__atomic_load_n(&c->watch, __ATOMIC_ACQUIRE) != SDP_DWATCH_LATER || LOADR(&c->inherited))
		return;
	/* As a ring: the socket stays open until set_ring(-1) saw no thread here. */
	__atomic_fetch_add(&c->ringers, 1, __ATOMIC_SEQ_CST);
	int fd = __atomic_load_n(&c->ring_fd, __ATOMIC_SEQ_CST);
	if (fd >= 0 && __atomic_load_n(&c->watch, __ATOMIC_SEQ_CST) == SDP_DWATCH_LATER) {
		struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLONESHOT, .data.u64 = c->watch_id};
		long r = syscall(SYS_epoll_ctl, c->watch_epfd, EPOLL_CTL_ADD, fd, &ev);
		if (r == 0 || errno == EEXIST) { /* EEXIST: another sleeper added it */
			uint32_t later = SDP_DWATCH_LATER;
			if (!__atomic_compare_exchange_n(&c->watch, &later, SDP_DWATCH_ADDED, 0, __ATOMIC_SEQ_CST,
							 __ATOMIC_SEQ_CST) &&
			    r == 0 && later == SDP_DWATCH_NONE)
				/* Taken meanwhile (a close), whose remover skipped the set. */
				(void)syscall(SYS_epoll_ctl, c->watch_epfd, EPOLL_CTL_DEL, fd, NULL);
		} /* else the next sleep tries again */
	}
	__atomic_fetch_sub(&c->ringers, 1, __ATOMIC_RELEASE);
}

int sdp_dconn_watch_take(struct sdp_dconn *c)
{
	return __atomic_exchange_n(&c->watch, SDP_DWATCH_NONE, __ATOMIC_SEQ_CST) == SDP_DWATCH_ADDED;
}

/* Arms since the last drain after which the rings are read: at most one
 * byte per arm waits in the socket's buffer meanwhile, each in a segment
 * of its own, which the kernel acknowledges late (a delayed ACK, 40 ms)
 * while the program reads nothing: the peer's congestion window (10
 * segments at first) would fill with rings, and its next ring wait for
 * that ACK. So rings are read (and acknowledged at once: TCP_QUICKACK)
 * every few arms. */
#define DRAIN_EVERY 4

int sdp_dconn_drain_due(const struct sdp_dconn *c)
{
	return LOADR(&c->arms) - LOADR(&c->drained_at) >= DRAIN_EVERY;
}

int sdp_dconn_drain(struct sdp_dconn *c, int fd)
{
	uint32_t z = 0;
	if (!__atomic_compare_exchange_n(&c->drain_lock, &z, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return 0; /* another thread drains: it reads these too */
	int r = 0;
	if (__atomic_load_n(&c->nodrain, __ATOMIC_SEQ_CST)) {
		r = 2;
	} else if (LOADR(&c->npush) != 0) {
		r = 1;
	} else if (LOADR(&c->inherited) && sdp_dconn_switching(c)) {
		r = 1; /* a fork child's: the switch's records are its parent's core's */
	} else {
		uint32_t arms = LOADR(&c->arms);
		long got = 0;
		uint8_t b[256];
		/* A fork child (inherited) looks before it takes: only the rings
		 * in front of a switch record, which its parent's core reads. */
		int peek = LOADR(&c->inherited) != 0;
		for (int round = 0; round < 64; round++) {
			long k = syscall(SYS_recvfrom, fd, b, sizeof b, MSG_DONTWAIT | (peek ? MSG_PEEK : 0), NULL, NULL);
			if (k == 0 && peek) {
				/* The peer's end, which the parent's switch watcher
				 * may not be there to see. */
				sdp_dconn_peer_gone(c);
				break;
			}
			if (k <= 0)
				break; /* empty, the peer's end (the watcher's), an error */
			long i = 0;
			while (i < k && b[i] == 0)
				i++;
			if (peek) {
				if (i > 0)
					(void)syscall(SYS_recvfrom, fd, b, (size_t)i, MSG_DONTWAIT, NULL, NULL);
				got += i;
				if (i < k) {
					r = 1;
					break;
				}
				if (k < (long)sizeof b)
					break;
				continue;
			}
			got += k;
			if (i < k) {
				/* The peer's switch record (its REQ): kept for the
				 * switch, which the core runs (the watcher may not see
				 * the urgent byte this read went past). */
				size_t n = (size_t)(k - i) < sizeof c->push ? (size_t)(k - i) : sizeof c->push;
				memcpy(c->push, b + i, n);
				__atomic_store_n(&c->npush, (uint32_t)n, __ATOMIC_RELEASE);
				r = 1;
				break;
			}
			if (k < (long)sizeof b)
				break;
		}
		STORER(&c->drained_at, arms);
		if (got > 0) {
			/* The peer's rings acknowledged now (their ACK would wait
			 * for the delayed-ACK timer). */
			tcp_set(fd, TCP_QUICKACK, 1);
		}
	}
	__atomic_store_n(&c->drain_lock, 0, __ATOMIC_RELEASE);
	return r;
}

void sdp_dconn_quiet(struct sdp_dconn *c)
{
	sdp_dconn_set_ring(c, -1);
	__atomic_store_n(&c->nodrain, 1, __ATOMIC_SEQ_CST);
	for (unsigned int k = 0; __atomic_load_n(&c->drain_lock, __ATOMIC_SEQ_CST) != 0; k++)
		if (k > 64)
			sched_yield();
}

size_t sdp_dconn_pushback(struct sdp_dconn *c, uint8_t *buf, size_t max)
{
	size_t n = __atomic_load_n(&c->npush, __ATOMIC_ACQUIRE);
	if (n > max)
		n = max;
	memcpy(buf, c->push, n);
	return n;
}

/* ---- the side lock: serialises the senders (or receivers) of one side of
 * a direction: threads of one process, or a parent and its fork children
 * sharing the fd. The word holds the holder's pid (bit 31: waiters), so a
 * holder killed mid-call is noticed and its lock taken over rather than
 * hanging its siblings. Uncontended: one CAS to take, one exchange to give.
 */
#define LOCK_WAITERS 0x80000000u

static pid_t cached_pid;
static pthread_once_t pid_once = PTHREAD_ONCE_INIT;
static void pid_forget(void) { cached_pid = 0; }
static void pid_setup(void) { pthread_atfork(NULL, NULL, pid_forget); }

uint32_t sdp_dconn_pid(void)
{
	pid_t p = cached_pid;
	if (p > 0)
		return (uint32_t)p;
	pthread_once(&pid_once, pid_setup);
	p = (pid_t)syscall(SYS_getpid);
	cached_pid = p;
	return (uint32_t)p;
}

/* How long a side lock may stay held by the same live process before the
 * waiter gives up: a holder keeps it for one copy (microseconds), so only
 * a peer writing into the word (or a process stopped holding it) lasts
 * that long. The caller treats it as a violation (the connection resets):
 * a hostile peer can delay a call, but not hang it, nonblocking or not. */
#define LOCK_GIVE_UP_ROUNDS 25 /* of sdp_dlock_round_ns: 5 s */
long sdp_dlock_round_ns = 200 * 1000 * 1000;

/* Frees the lock word w, which held v, when v names no live process: a
 * holder that died holding it (a fork child killed in a call), or a
 * peer's garbage. Only processes of this side take the word (this
 * process and its fork children, in its pid namespace). 1 when it did. */
static int free_if_dead(uint32_t *w, uint32_t v)
{
	pid_t holder = (pid_t)(v & ~LOCK_WAITERS);
	if (holder <= 0 || kill(holder, 0) == 0 || errno != ESRCH)
		return 0;
	__atomic_compare_exchange_n(w, &v, 0, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
	return 1;
}

/* 0 when locked, -1 when it gave up (above). */
static int lock_slow(uint32_t *w, uint32_t me)
{
	for (int i = 0; i < 128; i++) {
		sdp_cpu_relax();
		uint32_t z = 0;
		if (LOADR(w) == 0 && __atomic_compare_exchange_n(w, &z, me, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return 0;
	}
	uint32_t last = 0;
	int held = 0;   /* consecutive timeouts with the same holder */
	int looked = 0; /* the holder was asked about before the first sleep */
	for (;;) {
		uint32_t v = LOADR(w);
		if (v == 0) {
			/* Others may sleep: keep the waiters bit so the unlock wakes them. */
			if (__atomic_compare_exchange_n(w, &v, me | LOCK_WAITERS, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
				return 0;
			continue;
		}
		/* Held past the spin: a dead holder's word is freed at once,
		 * not after a sleep (a peer's garbage written into the word
		 * cost a call 200 ms each time). */
		if (!looked) {
			looked = 1;
			if (free_if_dead(w, v))
				continue;
		}
		if (!(v & LOCK_WAITERS) &&
		    !__atomic_compare_exchange_n(w, &v, v | LOCK_WAITERS, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			continue;
		long round = __atomic_load_n(&sdp_dlock_round_ns, __ATOMIC_RELAXED);
		struct timespec t = {.tv_sec = round / 1000000000, .tv_nsec = round % 1000000000};
		if (futex_wait(w, v | LOCK_WAITERS, &t) < 0 && errno == ETIMEDOUT) {
			if (free_if_dead(w, v | LOCK_WAITERS)) {
				held = 0;
				continue;
			}
			held = (v | LOCK_WAITERS) == last ? held + 1 : 1;
			last = v | LOCK_WAITERS;
			if (held >= LOCK_GIVE_UP_ROUNDS)
				return -1;
		}
	}
}

/* 0 when locked; -1 when the word stayed held (lock_slow): a violation. */
static inline int side_lock(uint32_t *w)
{
	uint32_t me = sdp_dconn_pid(), z = 0;
	if (!__atomic_compare_exchange_n(w, &z, me, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return lock_slow(w, me);
	return 0;
}

static inline void side_unlock(uint32_t *w)
{
	if (__atomic_exchange_n(w, 0, __ATOMIC_RELEASE) & LOCK_WAITERS)
		futex_wake(w, 1);
}

/* ---- the program's TCP options (struct sdp_tcpopts): under a side lock ---- */

void sdp_tcpopts_hold(struct sdp_tcpopts *o, int fd)
{
	if (side_lock(&o->lock) != 0)
		return;
	int nd, ck;
	if (__atomic_load_n(&o->state, __ATOMIC_RELAXED) == SDP_TCPOPTS_PROGRAM && tcp_get(fd, TCP_NODELAY, &nd) == 0 &&
	    tcp_get(fd, TCP_CORK, &ck) == 0) {
		o->nodelay = nd;
		o->cork = ck;
		if (ck != 0)
			tcp_set(fd, TCP_CORK, 0);
		if (nd == 0)
			tcp_set(fd, TCP_NODELAY, 1);
		__atomic_store_n(&o->state, SDP_TCPOPTS_HELD, __ATOMIC_RELEASE);
	}
	side_unlock(&o->lock);
}

int sdp_tcpopts_get(struct sdp_tcpopts *o, int name, int *v)
{
	int r = 0;
	if (side_lock(&o->lock) != 0)
		return 0;
	if (__atomic_load_n(&o->state, __ATOMIC_RELAXED) == SDP_TCPOPTS_HELD && (name == TCP_NODELAY || name == TCP_CORK)) {
		*v = name == TCP_NODELAY ? o->nodelay : o->cork;
		r = 1;
	}
	side_unlock(&o->lock);
	return r;
}

int sdp_tcpopts_set(struct sdp_tcpopts *o, int name, int v)
{
	int r = 0;
	if (side_lock(&o->lock) != 0)
		return 0;
	if (__atomic_load_n(&o->state, __ATOMIC_RELAXED) == SDP_TCPOPTS_HELD && (name == TCP_NODELAY || name == TCP_CORK)) {
		if (name == TCP_NODELAY)
			o->nodelay = v != 0;
		else
			o->cork = v;
		r = 1;
	}
	side_unlock(&o->lock);
	return r;
}

void sdp_tcpopts_release(struct sdp_tcpopts *o, int fd)
{
	if (side_lock(&o->lock) != 0)
		return;
	if (__atomic_load_n(&o->state, __ATOMIC_RELAXED) == SDP_TCPOPTS_HELD) {
		if (o->nodelay == 0)
			tcp_set(fd, TCP_NODELAY, 0);
		if (o->cork != 0)
			tcp_set(fd, TCP_CORK, o->cork);
	}
	__atomic_store_n(&o->state, SDP_TCPOPTS_GONE, __ATOMIC_RELEASE);
	side_unlock(&o->lock);
}

static void budget_woken(struct sdp_dconn *c);

/* ---- violations ------------------------------------------------------------ */

/* The peer broke the protocol: this side stops using the area, and its
 * peer (if it is still honest) sees a reset. */
static long violation(struct sdp_dconn *c)
{
	c->broken = SDP_DERR_PROTO;
	c->violations++;
	sdp_dconn_reset(c);
	return -ECONNRESET;
}

/* ---- wakes: publish, then look, then wake (one system call per sleeper
 * kind that announced itself; nothing when nobody sleeps) ---------------- */

/* Merges bell into a word of bells (1 + its number; 1: the socket ring,
 * which every sleeper on the socket hears, also when two asked with
 * different bells) and returns what the word held. A sequentially
 * consistent read-modify-write: what the caller loads next is ordered
 * after it. */
static uint32_t merge_bell(uint32_t *w, uint32_t bell)
{
	uint32_t want = bell < SDP_DBELLS ? 1 + bell : 1, old = __atomic_load_n(w, __ATOMIC_SEQ_CST), v;
	do
		v = old == 0 || old == want ? want : 1;
	while (!__atomic_compare_exchange_n(w, &old, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
	return old;
}

/* Arms one word with bell (merge_bell); a word that was not armed may
 * bring one ring, which arms counts (sdp_dconn_drain_due). */
static void arm_word(struct sdp_dconn *c, uint32_t *armed, uint32_t bell)
{
	if (merge_bell(armed, bell) == 0)
		__atomic_store_n(&c->arms, LOADR(&c->arms) + 1, __ATOMIC_RELAXED);
}

/* Wakes the sleepers announced on word, once: the first publish after an
 * announcement wakes them all (woken 0 -> 1), and the publishes after it
 * make no system call until one announces again. A woken sleeper takes
 * a cross-CPU wake-up (25-30 us in the 2-core VM) to run, and a sender
 * of 32 small messages meanwhile made 32 wakes of it: the sender slowed,
 * its receiver slept more, and a batch of 32 x 16 B settled at a quarter
 * of its rate. Why no wake is lost: a sleeper clears woken after it read
 * word's value and before its re-check (announce). A publisher that finds
 * woken set follows one that set it after that clear, and so bumps word
 * after the value the sleeper read (its sleep ends), or one that set it
 * before, whose bump the sleeper may have read, but then the clear came
 * later and the flag would read 0. */
static void wake_word(struct sdp_dconn *c, uint32_t *sleepers, uint32_t *word, uint32_t *armed, uint32_t *woken)
{
	FENCE(); /* what was published is visible before the look below */
	if (LOADR(sleepers) != 0 && __atomic_exchange_n(woken, 1, __ATOMIC_SEQ_CST) == 0) {
		__atomic_fetch_add(word, 1, __ATOMIC_SEQ_CST);
		futex_wake(word, INT_MAX);
		c->wakes_sent++;
	}
	uint32_t v;
	if (LOADR(armed) != 0 && (v = __atomic_exchange_n(armed, 0, __ATOMIC_SEQ_CST)) != 0) {
		ring_peer(c, v);
		c->evwakes_sent++;
	}
}

/* The peer may wait for data on d (what we send it). */
static void wake_data(struct sdp_dconn *c, struct sdp_ddir *d)
{
	wake_word(c, &d->data_sleepers, &d->data_word, &d->data_armed, &d->data_woken);
}

/* The peer may wait for space on d (what it sends us). */
static void wake_space(struct sdp_dconn *c, struct sdp_ddir *d)
{
	wake_word(c, &d->space_sleepers, &d->space_word, &d->space_armed, &d->space_woken);
}

/* Announces a sleep on (sleepers, word): after this, any publish that the
 * re-check below misses is followed by a wake of word. */
static void announce(struct sdp_dconn *c, uint32_t *sleepers, uint32_t *word, uint32_t *woken, struct sdp_dsleep *sl,
		     int what)
{
	__atomic_fetch_add(&c->sleeping, 1, __ATOMIC_SEQ_CST);
	__atomic_fetch_add(sleepers, 1, __ATOMIC_SEQ_CST);
	FENCE();
	sl->word = word;
	sl->val = __atomic_load_n(word, __ATOMIC_SEQ_CST);
	__atomic_store_n(woken, 0, __ATOMIC_SEQ_CST); /* after the value, before the re-check (wake_word) */
	FENCE(); /* the re-check's loads (relaxed ones too) after the clear: a store-load pair */
	sl->what = what;
}

/* Withdraws an announcement. */
static void withdraw(struct sdp_dconn *c, const struct sdp_dsleep *sl)
{
	struct sdp_ddir *d = &c->a->dir[sl->what == 0 ? 1 - c->side : c->side];
	uint32_t *sleepers = sl->what == 0 ? &d->data_sleepers : &d->space_sleepers;
	/* Never below 0, whatever the peer wrote there. */
	uint32_t v = LOADR(sleepers);
	while (v != 0 && !__atomic_compare_exchange_n(sleepers, &v, v - 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		;
	__atomic_fetch_sub(&c->sleeping, 1, __ATOMIC_SEQ_CST); /* this process's own: after its announce */
}

void sdp_dconn_woke(struct sdp_dconn *c, const struct sdp_dsleep *sl)
{
	withdraw(c, sl);
	budget_woken(c);
}

/* A write asked for and not possible (a nonblocking send without room, a
 * readiness asked POLLOUT in vain): EPOLLET's writable edge. Only this
 * process's threads write the count; readers load it atomically. */
static inline void count_nospace(struct sdp_dconn *c)
{
	__atomic_store_n(&c->nospace, __atomic_load_n(&c->nospace, __ATOMIC_RELAXED) + 1, __ATOMIC_SEQ_CST);
}

/* ---- adaptive polling (seed 002's feedback rules, per handle) ----------- */

/* A wait found what it waited for after k polls: the budget moves toward
 * twice what this wait needed. A granted wait that hit halves the wakes
 * between grants. */
static void budget_hit(struct sdp_dconn *c, uint32_t k)
{
	c->polls_hit++;
	uint32_t want = k * 2, b = c->budget > want ? (c->budget + want) / 2 : want;
	c->budget = b > c->poll_max ? c->poll_max : b < c->poll_min ? c->poll_min : b;
	if (c->granted) {
		c->granted = 0;
		c->grant_every = c->grant_every > 1 ? c->grant_every / 2 : 1;
	}
}

/* A wait spent its budget and sleeps. A granted wait that missed doubles
 * the wakes between grants (up to 64), so sparse traffic rarely pays. */
static void budget_miss(struct sdp_dconn *c)
{
	c->sleeps++;
	uint32_t b = c->budget / 2;
	c->budget = b < c->poll_min ? c->poll_min : b;
	if (c->granted) {
		c->granted = 0;
		c->grant_every = c->grant_every < 64 ? c->grant_every * 2 : 64;
	}
}

/* A sleeper was woken: the answer to what just arrived usually comes
 * within one peer wakeup, so every grant_every wakes the next wait may
 * poll the whole maximum, taking both ends out of the sleeping ping-pong. */
static void budget_woken(struct sdp_dconn *c)
{
	if (++c->wakes_seen >= c->grant_every && c->poll_max > 0) {
		c->wakes_seen = 0;
		c->budget = c->poll_max;
		c->granted = 1;
	}
}

int64_t sdp_now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

void sdp_spin_yield(uint32_t *k)
{
	int64_t t0 = sdp_now_ns();
	sched_yield();
	if (sdp_now_ns() - t0 >= SDP_YIELD_RAN_OTHER_NS)
		*k |= 127;
}

/* ---- spreading: the two ends of a connection on different CPUs ---------- *
 *
 * A polling wait makes progress only while the peer's thread runs. Where
 * more threads want to run than there are cores, the scheduler often
 * puts both ends of one connection on one CPU and both ends of another on
 * the other (its wake-up placement keeps threads that wake each other
 * together): then each wait hands the CPU to its peer by a yield, a round
 * trip costs two switches, and a ping-pong beside a bulk transfer of the
 * same two processes took 9.5 us a round trip instead of 0.35, while the
 * bulk moved 22 GB/s instead of 48 (2 cores: pinned by hand, each pair
 * split across the CPUs, against each pair on a CPU of its own). So at
 * every yield a wait notes its CPU in the area (ddir.cpu, one store when
 * it changed; a wait that polls less than a yield's worth costs nothing
 * more) and looks at the peer's; when the peer was on the same CPU
 * at SPREAD_AFTER yields in a row, the thread moves itself to another CPU
 * it may run on: the affinity without this CPU, then the thread's own
 * affinity again at once (the kernel does not move it back for that), so
 * the program's affinity is what it was. One side moves sooner than the
 * other, so that the two do not move together, and a handle moves at most
 * once per SPREAD_EVERY_NS. A thread allowed one CPU only never moves.
 * The peer writes the word: a wrong value can at most move this thread
 * once per SPREAD_EVERY_NS. */
#define SPREAD_AFTER 8u
#define SPREAD_EVERY_NS 20000000L

/* Moves the calling thread off cpu, to another CPU of its affinity. 1 when
 * it moved. */
static int move_off_cpu(int cpu)
{
	cpu_set_t mine, other;
	CPU_ZERO(&mine); /* the kernel fills only its own mask's bytes */
	if (cpu < 0 || cpu >= CPU_SETSIZE || syscall(SYS_sched_getaffinity, 0, sizeof mine, &mine) <= 0)
		return 0;
	other = mine;
	CPU_CLR(cpu, &other);
	if (CPU_COUNT(&other) == 0 || syscall(SYS_sched_setaffinity, 0, sizeof other, &other) != 0)
		return 0;
	syscall(SYS_sched_setaffinity, 0, sizeof mine, &mine);
	return 1;
}

/* At a yield of a wait on c: notes this thread's CPU in the area and
 * moves it when the peer has been on that CPU too (above). Two ends that
 * share a CPU both yield in their waits, so both notes are fresh there;
 * a wait that ends before its first yield notes nothing. sched_getcpu
 * reads the kernel's restartable-sequence area: no system call. */
static void spread(struct sdp_dconn *c)
{
	int cpu = sched_getcpu();
	if (cpu < 0)
		return;
	uint32_t *mine = &c->a->dir[c->side].cpu;
	if (LOADR(mine) != (uint32_t)cpu + 1)
		STORER(mine, (uint32_t)cpu + 1);
	if (LOADR(&c->a->dir[1 - c->side].cpu) != (uint32_t)cpu + 1) {
		c->shared_cpu = 0;
		return;
	}
	if (++c->shared_cpu < SPREAD_AFTER << (c->side == 0 ? 2 : 0))
		return;
	c->shared_cpu = 0;
	int64_t now = sdp_now_ns();
	if (now - c->moved_ns < SPREAD_EVERY_NS)
		return;
	c->moved_ns = now;
	if (move_off_cpu(cpu))
		__atomic_store_n(&c->moves, c->moves + 1, __ATOMIC_RELAXED);
}

/* ---- preemption: small messages before bulk on a shared CPU ----------- *
 *
 * Seed 003 (PeRF) on the direct path. No channel is shared here (each
 * connection has its own area); what a bulk transfer and a ping-pong of
 * the same processes share is the CPU. Where more threads want to run
 * than there are cores, a small message's round trip needs both its
 * threads on a CPU at once, and a bulk sender and receiver that copy
 * without pause keep them off: on 2 cores a 16 B ping-pong beside a
 * 1 MiB stream made a tenth of its round trips, and 32 x 16 B batches a
 * quarter. The kernel's scheduler cannot be told (lowering a thread's
 * priority is one-way without privilege), so the bulk side gives way:
 *
 *   - a handle is small while its last two receives each asked for less
 *     than a block (the size of the messages the program reads, the
 *     whole request of a MSG_WAITALL receive: a bulk reader asks for
 *     much, and one short read after a long one is a tail, not a
 *     message; sends are no guide, since a large write's last piece is
 *     small too);
 *   - a receive on a small handle whose poll found its data after one of
 *     its yields gave the CPU to another thread (it polled for its peer,
 *     something else ran, and the answer was late for it) marks the
 *     process starved for PREEMPT_WINDOW_NS, by that handle; a wait that
 *     finds nothing (an idle connection) marks nothing. The window is
 *     long (50 ms) because the mark comes only after a late message: a
 *     2 ms window let the bulk stream go free as soon as the small
 *     messages were on time again, they were late again within
 *     milliseconds, and more than one round trip in a hundred was (a
 *     16 B ping-pong's p99 beside a 1 MiB stream 10-12 us, against
 *     0.6-1.8 with 50 ms);
 *   - a blocking send that asks for a block or more on another handle
 *     with preempt set, while the process is starved, first sleeps
 *     PREEMPT_SHARE times as long as its previous sub-write took to
 *     copy (at most PREEMPT_PAUSE_MAX_NS): a scheduling point between
 *     sub-writes (a send returns after what fitted) where the small
 *     messages that wait go first, and the bulk stream keeps about a
 *     seventeenth of the time while they starve (with 8, a ninth, 32 x
 *     16 B batches beside a 1 MiB stream kept 0.73-0.74x of their rate
 *     alone in `sdpshim bench seed003`, against 0.83-0.84x with 16, and
 *     the stream beside them 3.7-3.8 GB/s against 2.4). The copy is timed only while
 *     the process is starved (an unstarved send costs nothing more), on
 *     the wall clock: a copy the scheduler interrupted gave the CPU away
 *     already, and counting only its CPU time left the bulk stream twice
 *     the share (a ping-pong's p99 beside it 2.9x alone rather than
 *     1.1x). So that such an interruption cannot stretch the pause of a
 *     small sub-write (a slow reader frees a block at a time), the pause
 *     is also at most PREEMPT_SHARE times the copy at 1 GB/s.
 *
 * Work-conserving: nothing pauses unless a small message was late after
 * its wait lost the CPU (with free cores its yields return at once), a
 * bulk stream alone never pauses, and nonblocking sends (event loops)
 * never sleep. The mark is per process (and per copy of this file: the
 * interposer's and the Go core's), and goes onto the user's tenant board
 * too (tenant.c, "The starved mark"), where the bulk sends of the user's
 * other processes read it at their looks and pause on it as on their
 * own: a ping-pong and a bulk stream of two applications share the CPU
 * as those of one do. It cannot tell whether the CPU went to a bulk
 * stream or to another program, and pauses the bulk streams either way
 * (fewer threads then want the CPU). */
#define PREEMPT_WINDOW_NS 50000000L
#define PREEMPT_SHARE 16
#define PREEMPT_PAUSE_MAX_NS 2000000L

static int64_t starved_at;  /* when a small message was last late */
static uintptr_t starved_by; /* for which sender (a handle, or a Go core's stream) */

void sdp_preempt_starved(uintptr_t by, int board_fd, uint32_t board_pid)
{
	int64_t now = sdp_now_ns();
	__atomic_store_n(&starved_by, by, __ATOMIC_RELAXED);
	__atomic_store_n(&starved_at, now, __ATOMIC_RELAXED);
	sdp_tenant_starved(board_fd, board_pid, now); /* and to the user's other processes */
}

static void mark_starved(const struct sdp_dconn *c)
{
	sdp_preempt_starved((uintptr_t)c, LOADR(&c->board_fd), LOADR(&c->board_pid));
}

/* Whether a small message other than by's own was late within the
 * window: one of this process's (starved_at, for another sender), or one
 * of another process's of the user, as the board said (tenant.c). */
static int starved(uintptr_t by, int64_t now)
{
	int64_t at = __atomic_load_n(&starved_at, __ATOMIC_RELAXED);
	if (at != 0 && now - at < PREEMPT_WINDOW_NS && __atomic_load_n(&starved_by, __ATOMIC_RELAXED) != by)
		return 1;
	return sdp_tenant_starved_within(now, PREEMPT_WINDOW_NS);
}

int sdp_preempt_note(uint32_t *hist, uint64_t whole, uint64_t block)
{
	uint32_t old = LOADR(hist);
	uint32_t h = ((old << 1) | (whole < block)) & 3;
	if (h != old)
		STORER(hist, h); /* written only when it changes: the line stays clean */
	return h == 3;
}

/* Records whether a receive of whole bytes asks for a small message, and
 * returns whether c is small now (its last two receives were). */
static int note_receive(struct sdp_dconn *c, size_t whole) { return sdp_preempt_note(&c->small_hist, whole, c->s - HDR); }

int sdp_preempt_point(uintptr_t by, int board_fd, uint32_t board_pid, int64_t *copy_ns, int64_t *copy_bytes,
		      uint64_t *pauses)
{
	int64_t now = sdp_now_ns();
	sdp_tenant_peek(board_fd, board_pid, now); /* the other processes' mark, unless a look just read it */
	if (!starved(by, now)) {
		/* Nobody starved lately, or only this sender's own reads. A copy
		 * timed while starved is no guide to a later pause. */
		if (LOADR(copy_bytes) != 0) {
			STORER(copy_ns, 0);
			STORER(copy_bytes, 0);
		}
		return 0;
	}
	int64_t took = __atomic_exchange_n(copy_ns, 0, __ATOMIC_RELAXED);
	int64_t bytes = __atomic_exchange_n(copy_bytes, 0, __ATOMIC_RELAXED);
	if (took > bytes)
		took = bytes; /* 1 ns a byte: 1 GB/s */
	int64_t pause = took * PREEMPT_SHARE; /* took: one sub-write's, far below overflow */
	if (pause > PREEMPT_PAUSE_MAX_NS)
		pause = PREEMPT_PAUSE_MAX_NS;
	if (pause >= 1000) {
		int saved = errno; /* the send's caller sees the send's errno, not the sleep's */
		uint32_t nobody = 0; /* a word nobody wakes: a timed sleep (a signal ends it early) */
		struct timespec t = {0, pause};
		futex_wait(&nobody, 0, &t);
		errno = saved;
		__atomic_fetch_add(pauses, 1, __ATOMIC_RELAXED);
	}
	return 1;
}

/* The scheduling point before a bulk sub-write on c (above). Returns 1
 * when another sender starved the process lately: the sub-write's copy
 * is to be timed then (c->copy_ns). */
static int preempt_point(struct sdp_dconn *c)
{
	return sdp_preempt_point((uintptr_t)c, LOADR(&c->board_fd), LOADR(&c->board_pid), &c->copy_ns, &c->copy_bytes,
				 &c->pauses);
}

/* Polls cond (a readiness test) up to the budget (sdp_spin_step, spreading
 * at its yields); 1 when it came true. With small (a receive of a small
 * message), a cond that came true after a yield that gave the CPU to
 * another thread marks the process starved (preemption, above). */
#define POLL_UNTIL(c, cond, small)                                                                           \
	({                                                                                                   \
		int ok_ = 0, lost_ = 0;                                                                      \
		for (uint32_t k_ = 1; k_ <= (c)->budget; k_++) {                                             \
			if (cond) {                                                                          \
				budget_hit((c), k_);                                                         \
				if (lost_ && (small))                                                        \
					mark_starved(c);                                                     \
				ok_ = 1;                                                                     \
				break;                                                                       \
			}                                                                                    \
			int yields_ = (k_ & 127) == 0;                                                       \
			if (yields_)                                                                         \
				spread(c);                                                                   \
			sdp_spin_step(&k_);                                                                  \
			lost_ |= yields_ && (k_ & 127) != 0; /* its yield ran another thread */              \
		}                                                                                            \
		ok_;                                                                                         \
	})

/* ---- iovec cursors --------------------------------------------------------- */

struct iocur {
	const struct iovec *iov;
	int cnt, i;
	size_t off;  /* into iov[i] */
	size_t left; /* bytes left in all */
};

/* A cursor over iov[0..cnt) past its first skip bytes. */
static void cur_init(struct iocur *k, const struct iovec *iov, int cnt, size_t skip)
{
	k->iov = iov;
	k->cnt = cnt;
	k->i = 0;
	k->off = 0;
	k->left = 0;
	for (int i = 0; i < cnt; i++)
		k->left += iov[i].iov_len;
	if (skip > k->left)
		skip = k->left;
	k->left -= skip;
	while (skip > 0) {
		size_t c = k->iov[k->i].iov_len - k->off;
		if (c > skip)
			c = skip;
		k->off += c;
		skip -= c;
		if (k->off == k->iov[k->i].iov_len && skip > 0) {
			k->i++;
			k->off = 0;
		}
	}
}

/* Copies n bytes between the cursor's buffers and mem (out: mem -> iov),
 * advancing the cursor. n <= k->left. */
static void cur_copy(struct iocur *k, void *mem, size_t n, int out)
{
	uint8_t *m = mem;
	k->left -= n;
	while (n > 0) {
		while (k->off == k->iov[k->i].iov_len) {
			k->i++;
			k->off = 0;
		}
		size_t c = k->iov[k->i].iov_len - k->off;
		if (c > n)
			c = n;
		uint8_t *b = (uint8_t *)k->iov[k->i].iov_base + k->off;
		if (out)
			memcpy(b, m, c);
		else
			memcpy(m, b, c);
		m += c;
		n -= c;
		k->off += c;
	}
}

/* ---- send ------------------------------------------------------------------ */

/* Why sending on this side cannot go on, or 0. */
static long send_blocked(const struct sdp_dconn *c)
{
	const struct sdp_ddir *out = &c->a->dir[c->side], *in = &c->a->dir[1 - c->side];
	if (c->broken || LOAD(&in->reset))
		return -ECONNRESET;
	if (LOAD(&out->fin) || LOAD(&out->rx_closed) || LOAD(&out->reset))
		return -EPIPE;
	return 0;
}

/* Appends the rest of k to the block this side published last (tail),
 * when it fits there whole and the receiver has not begun to read the
 * block: claimed DATA -> FILLING, the payload, the length, DATA again (the
 * status byte last, as a publish). Whole, because a send that fits is
 * published at once, as the kernel copies a write that fits its buffer
 * before the call returns: a sender killed after the call leaves its
 * message whole, and one killed during it leaves none of it.
 * Only while the receiver is at least one block behind the tail: one that
 * keeps up would find the block claimed (and wait for the append), so
 * the send takes a fresh block as before. Bytes appended: the rest of k, or 0.
 * Under the sender's lock. */
static size_t append_locked(struct sdp_dconn *c, struct iocur *k, uint32_t tail, size_t limit)
{
	uint8_t *st = &status_of(c, c->side)[tail & (c->n - 1)];
	struct sdp_dblk *b = block_of(c, c->side, tail);
	uint32_t room = c->s - HDR;
	if (LOAD(st) != SDP_DBLK_DATA || LOADR(&b->len) + k->left > room ||
	    LOADR(&c->a->dir[c->side].rx_next) == tail)
		return 0; /* read or being read, full, or next to be read: the cheap looks first */
	uint8_t want = SDP_DBLK_DATA;
	if (!__atomic_compare_exchange_n(st, &want, SDP_DBLK_FILLING, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return 0;
	/* Claimed: the receiver leaves a FILLING block alone. The length is
	 * read again (the peer may have written it: never trusted). */
	uint32_t len = LOADR(&b->len);
	size_t n = 0;
	if (len <= room && k->left <= room - len && k->left <= limit &&
	    LOADR(&b->seq) == LOADR(&c->a->dir[c->side].tx_seq) - 1) {
		n = k->left;
		cur_copy(k, (uint8_t *)(b + 1) + len, n, 0);
		STORER(&b->len, len + (uint32_t)n);
	}
	STORE(st, SDP_DBLK_DATA); /* the status byte last */
	return n;
}

/* The block after idx, whose header carries flags: the block the flag
 * names (SDP_DBLK_NEXT), in the ring's next lap so that the free-running
 * index only grows, else the next in the ring. */
static uint32_t next_index(const struct sdp_dconn *c, uint32_t idx, uint32_t flags)
{
	if (flags & SDP_DBLK_NEXT)
		return (idx | (c->n - 1)) + 1 + (SDP_DBLK_NEXT_POS(flags) & (c->n - 1));
	return idx + 1;
}

/* Where the block filled at position at links to (its header's flags):
 * the lowest free block other than it. Only the sender fills blocks, so
 * the block stays free until the sender's next fill. So a connection
 * whose receiver keeps up (a ping-pong, a request and its answer) goes
 * back and forth between the ring's first blocks and touches their pages
 * only, a bulk stream uses every block, and any free block is the
 * sender's to fill next: the ring holds as much as before, whatever came
 * first. With no other block free, the next in the ring (it waits for
 * the receiver, as a full ring does). Relaxed looks: the fill looks at
 * the block again, with acquire, before it writes. */
static uint32_t link_of(const struct sdp_dconn *c, const uint8_t *status, uint32_t at)
{
	for (uint32_t i = 0; i < c->n; i++)
		if (i != at && LOADR(&status[i]) == SDP_DBLK_EMPTY)
			return i == ((at + 1) & (c->n - 1)) ? 0 : SDP_DBLK_NEXT | (i << 16);
	return 0;
}

/* Fills free blocks from k (and appends a small rest to the block filled
 * last) while the receiver's window and the reach (below; 0: none) let
 * it: the bytes published. Under the sender's lock. */
static long send_locked(struct sdp_dconn *c, struct iocur *k, uint32_t reach)
{
	struct sdp_ddir *d = &c->a->dir[c->side];
	uint8_t *status = status_of(c, c->side);
	uint32_t idx = LOADR(&d->tx_next), seq = LOADR(&d->tx_seq), room = c->s - HDR, skipped = 0;
	uint32_t tail = LOADR(&d->tx_tail); /* the block filled last: appends go there */
	uint32_t win = LOAD(&d->rx_window);
	uint64_t held = LOADR(&d->tx_bytes) - LOAD(&d->rx_bytes); /* unread at the peer */
	size_t done = 0;
	if (LOADR(&d->fin) || LOAD(&d->reset))
		return -EPIPE; /* nothing after the FIN (set under this lock) */
	/* Appends only while a block is free: a full ring is a full send
	 * buffer, where the kernel refuses small writes too. */
	if (seq > 0 && k->left < room && (win == 0 || held < win) && (reach == 0 || held < reach) &&
	    LOAD(&status[idx & (c->n - 1)]) == SDP_DBLK_EMPTY)
		done = append_locked(c, k, tail, win > 0 ? win - held : SIZE_MAX);
	while (k->left > 0) {
		if (win > 0 && held + done >= win)
			break; /* the receiver's buffer is full */
		if (reach > 0 && held + done >= reach)
			break; /* the reach (below): whole blocks up to it */
		uint8_t st = LOAD(&status[idx & (c->n - 1)]);
		if (st == SDP_DBLK_RETAINED) { /* the receiver holds it: skip, not block */
			idx++;
			if (++skipped >= c->n)
				break;
			continue;
		}
		if (st != SDP_DBLK_EMPTY)
			break; /* full (or garbage, which reads as full) */
		size_t n = k->left < room ? k->left : room;
		if (win > 0 && n > win - (held + done))
			n = win - (held + done);
		uint32_t flags = link_of(c, status, idx & (c->n - 1));
		struct sdp_dblk *b = block_of(c, c->side, idx);
		cur_copy(k, b + 1, n, 0);
		b->stream = c->stream;
		b->seq = seq;
		b->len = (uint32_t)n;
		b->flags = flags;
		STORE(&status[idx & (c->n - 1)], SDP_DBLK_DATA); /* the status byte last */
		tail = idx;
		idx = next_index(c, idx, flags);
		seq++;
		done += n;
	}
	if (done > 0) {
		STORER(&d->tx_tail, tail);
		STORER(&d->tx_next, idx);
		STORER(&d->tx_seq, seq);
		__atomic_fetch_add(&d->tx_bytes, done, __ATOMIC_RELAXED);
	}
	return (long)done;
}

/* The reach. A direction holds what the kernel's largest send buffer
 * holds (shim/config/ring.go: 4 MiB at its usual size), so that what a
 * program writes ahead of a reader that does not read yet fits as it does
 * on kernel TCP: two ends that each write a few MB before reading the
 * other's finish there, and waited for each other for ever on a smaller
 * ring. A sender that used the whole ring against a reader that does read
 * on would keep that reader copying out of megabytes the caches no longer
 * hold, and touch (make resident) every page of the ring: a bulk stream's
 * copies ran a fifth slower that way. So a blocking send keeps within the
 * reach, SDP_DREACH_BLOCKS blocks' bytes of its reader (the ring's whole
 * size before it followed tcp_wmem); at the reach it polls, as a wait
 * does, for the reader to take some. A reader that reads on comes within
 * the poll, and the sender goes on within the reach; one that does not
 * gets the rest of the ring from this call on, as a kernel socket's
 * buffer takes what a reader leaves unread. A nonblocking send (an event
 * loop's) has the whole ring, as poll and epoll say: it never polls. The
 * reach is this process's own choice; the peer sees only the blocks. A
 * peer that writes garbage into rx_bytes can only make the sender take
 * the whole ring at once. */
#define SDP_DREACH_BLOCKS 64

/* The reach of c in bytes; 0 when the ring holds no more than it. */
static uint32_t reach_of(const struct sdp_dconn *c)
{
	return c->n > SDP_DREACH_BLOCKS ? SDP_DREACH_BLOCKS * (c->s - HDR) : 0;
}

/* 1 when the bytes this side sent and its reader has not taken are
 * fewer than reach. */
static int within_reach(const struct sdp_dconn *c, uint32_t reach)
{
	const struct sdp_ddir *d = &c->a->dir[c->side];
	return LOADR(&d->tx_bytes) - LOAD(&d->rx_bytes) < reach;
}

/* 1 when a send would find a free block: the first block from the cursor
 * that is not retained is empty (what send_locked would fill; any other
 * value, garbage included, reads as full). */
static int send_room(const struct sdp_dconn *c)
{
	const struct sdp_ddir *d = &c->a->dir[c->side];
	const uint8_t *status = status_of(c, c->side);
	uint32_t win = LOAD(&d->rx_window);
	if (win > 0 && LOADR(&d->tx_bytes) - LOAD(&d->rx_bytes) >= win)
		return 0;
	uint32_t idx = LOADR(&d->tx_next);
	for (uint32_t k = 0; k < c->n; k++, idx++) {
		uint8_t st = LOAD(&status[idx & (c->n - 1)]);
		if (st != SDP_DBLK_RETAINED)
			return st == SDP_DBLK_EMPTY;
	}
	return 0;
}

long sdp_dconn_sendv(struct sdp_dconn *c, const struct iovec *iov, int cnt, size_t skip, int flags,
		     struct sdp_dsleep *sl)
{
	struct sdp_ddir *d = &c->a->dir[c->side];
	long r = send_blocked(c);
	/* The peer closed its reading end (and nothing else ended): the kernel
	 * takes the first write, which the peer answers with a reset; later
	 * ones fail. */
	int take_one = r == -EPIPE && LOAD(&d->rx_closed) && !LOAD(&d->fin) && !LOAD(&d->reset) &&
		       !LOADR(&c->closed_told);
	if (r != 0 && !take_one)
		return r;
	struct iocur k;
	cur_init(&k, iov, cnt, skip);
	if (k.left == 0)
		return 0;
	if (take_one) {
		STORER(&c->closed_told, 1);
		return (long)k.left;
	}
	/* A blocking bulk send: a scheduling point for small messages that
	 * starve (preempt_point) and, without a send timeout to keep, a turn
	 * among the bulk senders of this user's processes (tenant.c). */
	int bulk = k.left >= c->s - HDR && !(flags & SDP_D_NONBLOCK) && LOADR(&c->preempt);
	if (bulk && __atomic_load_n(&c->sndtimeo, __ATOMIC_RELAXED) == 0 && sdp_tenant_enter(c) > 0)
		__atomic_fetch_add(&c->pauses, 1, __ATOMIC_RELAXED);
	int timed = bulk && preempt_point(c);
	uint32_t reach = (flags & SDP_D_NONBLOCK) ? 0 : reach_of(c);
	for (int round = 0;; round++) {
		if (side_lock(&d->tx_lock) != 0)
			return violation(c);
		int64_t t0 = timed ? sdp_now_ns() : 0;
		r = send_locked(c, &k, reach);
		if (timed && r > 0) {
			__atomic_fetch_add(&c->copy_ns, sdp_now_ns() - t0, __ATOMIC_RELAXED);
			__atomic_fetch_add(&c->copy_bytes, r, __ATOMIC_RELAXED);
		}
		side_unlock(&d->tx_lock);
		if (r > 0) {
			wake_data(c, d);
			return r;
		}
		if (r < 0)
			return r;
		if ((r = send_blocked(c)) != 0)
			return r;
		if (reach > 0 && !within_reach(c, reach) && send_room(c)) {
			/* Only the reach stopped it: a reader that reads on
			 * comes within the poll, else the whole ring (above). */
			if (!POLL_UNTIL(c, within_reach(c, reach) || send_blocked(c), 0))
				reach = 0;
			round = -1;
			continue;
		}
		if (flags & SDP_D_NONBLOCK) {
			/* As the kernel's SOCK_NOSPACE: counted (EPOLLET's
			 * writable edge), and, for an edge-triggered epoll
			 * sleeper that does not arm the room itself, the room
			 * the peer makes next is armed (counted, then looked
			 * at: Dekker with sdp_dconn_want_nospace). Poll, select
			 * and level-triggered sleepers arm for themselves. */
			count_nospace(c);
			uint32_t nb = __atomic_load_n(&c->nospace_arm, __ATOMIC_SEQ_CST);
			if (nb != 0)
				arm_word(c, &d->space_armed, nb - 1);
			return -EAGAIN;
		}
		if (round == 0) {
			if (POLL_UNTIL(c, send_room(c) || send_blocked(c), 0))
				continue;
			budget_miss(c);
			announce(c, &d->space_sleepers, &d->space_word, &d->space_woken, sl, 1);
			if (!send_room(c) && send_blocked(c) == 0)
				return SDP_D_WAIT;
			withdraw(c, sl); /* room came while announcing */
			continue;
		}
		/* Room seen but taken by a sibling thread: go round again. */
		if (round > 64) {
			sched_yield();
			round = 0;
		}
	}
}

/* ---- recv ------------------------------------------------------------------ */

/* How many looks a receiver gives a block the sender is appending to
 * (about a microsecond: an append copies at most one block). */
#define FILLING_SPINS 256

/* Copies out what has arrived, up to len; 0 when nothing has, -ECONNRESET
 * on a violation. Consumes (frees blocks, moves the cursors) unless peek. */
static long recv_locked(struct sdp_dconn *c, struct iocur *k, int peek, int *freed)
{
	int from = 1 - c->side;
	struct sdp_ddir *d = &c->a->dir[from];
	uint8_t *status = status_of(c, from);
	uint32_t idx = LOADR(&d->rx_next), seq = LOADR(&d->rx_seq), off = LOADR(&d->rx_off), room = c->s - HDR;
	size_t done = 0;
	uint32_t fin = LOAD(&d->fin), fin_seq = LOADR(&d->fin_seq);
	for (uint32_t seen = 0; k->left > 0 && seen < c->n; seen++) {
		if (fin && seq == fin_seq)
			break; /* the FIN: nothing after it is the stream's */
		uint8_t *stp = &status[idx & (c->n - 1)], st = LOAD(stp);
		if (st == SDP_DBLK_RETAINED) {
			idx++;
			continue;
		}
		if (st == SDP_DBLK_READING)
			return violation(c); /* only a reader holding this lock sets it */
		/* Claimed for the copy: the sender appends to a DATA block only.
		 * FILLING: it is appending now (a copy of at most one block):
		 * a short bounded wait, then the block is left for the call
		 * after the sender's publish, which wakes this side. */
		for (int spin = 0; st == SDP_DBLK_FILLING && spin < FILLING_SPINS; spin++) {
			sdp_cpu_relax();
			st = LOAD(stp);
		}
		if (st != SDP_DBLK_DATA ||
		    !__atomic_compare_exchange_n(stp, &st, SDP_DBLK_READING, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			break;
		const struct sdp_dblk *b = block_of(c, from, idx);
		struct sdp_dblk h;
		memcpy(&h, b, sizeof h);
		if (peek && done > 0 && h.seq != seq) {
			/* A peek leaves the blocks it read in place: a full
			 * ring's last block links back to one of them (its seq
			 * behind), where the published bytes end. */
			STORE(stp, SDP_DBLK_DATA);
			break;
		}
		if (h.stream != c->stream || h.seq != seq || h.len > room || (h.flags & ~(SDP_DBLK_NEXT | 0xffff0000u)) != 0 ||
		    off > h.len) {
			STORE(stp, SDP_DBLK_DATA);
			return violation(c);
		}
		size_t n = h.len - off < k->left ? h.len - off : k->left;
		cur_copy(k, (uint8_t *)(b + 1) + off, n, 1);
		done += n;
		off += (uint32_t)n;
		if (off < h.len || peek) {
			STORE(stp, SDP_DBLK_DATA); /* bytes left in it, or only peeked */
			if (off < h.len)
				break; /* the caller's buffer is full */
		} else {
			/* The cursors move past the block before it is freed, so
			 * that a look by another thread (recv_ready) never finds
			 * the cursor on a freed block with a published one behind
			 * it: it finds the block being read, or the cursor past. */
			STORE(&d->rx_seq, seq + 1);
			STORE(&d->rx_next, next_index(c, idx, h.flags));
			STORE(stp, SDP_DBLK_EMPTY); /* after the copy */
			(*freed)++;
		}
		idx = next_index(c, idx, h.flags);
		seq++;
		off = 0;
	}
	if (!peek && done > 0) {
		STORER(&d->rx_next, idx);
		STORER(&d->rx_seq, seq);
		STORER(&d->rx_off, off);
		__atomic_fetch_add(&d->rx_bytes, done, __ATOMIC_RELAXED);
	}
	return (long)done;
}

/* How many times a look reads the cursor again when it moved meanwhile
 * (a sibling thread reading; a peer writing the word can only make the
 * look give up: its answer then may be stale, as a look without the
 * retry's would). */
#define LOOK_TRIES 64

/* 1 when a block waits at the read cursor, past retained ones (what
 * recv_locked would read). The cursor is read again after the status
 * bytes, and the look made again if it moved: a sibling thread inside
 * recv_locked moves it past a block before it frees the block, so a
 * cursor that stayed put names a block that was not freed under the look
 * (docs/direct.md; tools/model/direct.pml, BROKEN=10). */
static int recv_ready(const struct sdp_dconn *c)
{
	const struct sdp_ddir *d = &c->a->dir[1 - c->side];
	const uint8_t *status = status_of(c, 1 - c->side);
	uint32_t at = LOAD(&d->rx_next);
	for (int tries = 0;; tries++) {
		int ready = 0;
		uint32_t idx = at;
		for (uint32_t k = 0; k < c->n; k++, idx++) {
			uint8_t st = LOAD(&status[idx & (c->n - 1)]);
			/* READING: a sibling thread copies out of it now (it may
			 * leave bytes). FILLING is not ready: the sender's
			 * publish when its append ends wakes whoever sleeps
			 * meanwhile. */
			if (st != SDP_DBLK_RETAINED) {
				ready = st == SDP_DBLK_DATA || st == SDP_DBLK_READING;
				break;
			}
		}
		uint32_t now = LOAD(&d->rx_next);
		if (now == at || tries >= LOOK_TRIES)
			return ready;
		at = now;
	}
}

/* What a receiver with nothing to read gets: 0 at EOF, -ECONNRESET after
 * a reset or violation, 1 to wait. */
static long recv_end(struct sdp_dconn *c)
{
	const struct sdp_ddir *d = &c->a->dir[1 - c->side];
	if (c->broken || LOAD(&d->reset))
		return -ECONNRESET;
	if (LOAD(&d->fin)) {
		/* rx_seq read again after the look, as recv_ready's cursor: a
		 * sibling thread that reads the last blocks meanwhile is no
		 * FIN that skips blocks. */
		for (int tries = 0;; tries++) {
			uint32_t seq = LOAD(&d->rx_seq);
			if (LOADR(&d->fin_seq) == seq)
				return 0; /* everything before the FIN was read */
			if (recv_ready(c))
				return 1; /* blocks came before the FIN: read them first */
			if (LOAD(&d->rx_seq) == seq || tries >= LOOK_TRIES)
				return violation(c); /* a FIN that skips blocks never sent */
		}
	}
	return 1;
}

long sdp_dconn_recvv(struct sdp_dconn *c, const struct iovec *iov, int cnt, size_t skip, int flags,
		     struct sdp_dsleep *sl)
{
	struct sdp_ddir *d = &c->a->dir[1 - c->side];
	if (c->broken)
		return -ECONNRESET;
	struct iocur k0;
	cur_init(&k0, iov, cnt, skip);
	if (k0.left == 0)
		return 0;
	int small = note_receive(c, k0.left + skip);
	for (int polled = 0;;) {
		int freed = 0;
		struct iocur k = k0;
		if (side_lock(&d->rx_lock) != 0)
			return violation(c);
		long r = recv_locked(c, &k, flags & SDP_D_PEEK, &freed);
		side_unlock(&d->rx_lock);
		if (freed || (r > 0 && !(flags & SDP_D_PEEK) && LOADR(&d->rx_window) > 0))
			wake_space(c, d); /* blocks freed, or window room made */
		if (r != 0)
			return r;
		if ((r = recv_end(c)) != 1)
			return r;
		if (flags & SDP_D_NONBLOCK)
			return -EAGAIN;
		if (!polled) {
			polled = 1;
			if (POLL_UNTIL(c, recv_ready(c) || LOAD(&d->fin) || LOAD(&d->reset), small))
				continue;
			budget_miss(c);
		}
		announce(c, &d->data_sleepers, &d->data_word, &d->data_woken, sl, 0);
		if (!recv_ready(c) && recv_end(c) == 1)
			return SDP_D_WAIT;
		withdraw(c, sl);
	}
}

long sdp_dconn_send(struct sdp_dconn *c, const void *buf, size_t len, int flags, struct sdp_dsleep *sl)
{
	struct iovec v = {.iov_base = (void *)buf, .iov_len = len};
	return sdp_dconn_sendv(c, &v, 1, 0, flags, sl);
}

long sdp_dconn_recv(struct sdp_dconn *c, void *buf, size_t len, int flags, struct sdp_dsleep *sl)
{
	struct iovec v = {.iov_base = buf, .iov_len = len};
	return sdp_dconn_recvv(c, &v, 1, 0, flags, sl);
}

/* ---- blocking wrappers ------------------------------------------------------- */

static void sleep_on(struct sdp_dconn *c, struct sdp_dsleep *sl)
{
	sdp_dconn_watch_now(c); /* after the announcement is fine too: the watcher's mark wakes it */
	futex_wait(sl->word, sl->val, NULL);
	sdp_dconn_woke(c, sl);
}

long sdp_dconn_send_all(struct sdp_dconn *c, const void *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		struct sdp_dsleep sl;
		long r = sdp_dconn_send(c, (const uint8_t *)buf + done, len - done, 0, &sl);
		if (r == SDP_D_WAIT) {
			sleep_on(c, &sl);
			continue;
		}
		if (r < 0)
			return done ? (long)done : r;
		done += (size_t)r;
	}
	return (long)done;
}

long sdp_dconn_recv_wait(struct sdp_dconn *c, void *buf, size_t len, int flags)
{
	size_t done = 0;
	for (;;) {
		struct sdp_dsleep sl;
		long r = sdp_dconn_recv(c, (uint8_t *)buf + done, len - done, flags & ~SDP_D_WAITALL, &sl);
		if (r == SDP_D_WAIT) {
			sleep_on(c, &sl);
			continue;
		}
		if (r <= 0)
			return done ? (long)done : r;
		done += (size_t)r;
		if (!(flags & SDP_D_WAITALL) || done == len || (flags & SDP_D_PEEK))
			return (long)done;
	}
}

/* ---- sleeps the caller makes itself ----------------------------------------------- */

int sdp_dconn_sleep_prepare(struct sdp_dconn *c, int what, struct sdp_dsleep *sl)
{
	sdp_dconn_watch_now(c);
	int sleep;
	if (what == 0) {
		struct sdp_ddir *d = &c->a->dir[1 - c->side];
		announce(c, &d->data_sleepers, &d->data_word, &d->data_woken, sl, 0);
		sleep = !recv_ready(c) && recv_end(c) == 1;
	} else {
		struct sdp_ddir *d = &c->a->dir[c->side];
		announce(c, &d->space_sleepers, &d->space_word, &d->space_woken, sl, 1);
		sleep = !send_room(c) && send_blocked(c) == 0;
	}
	/* Detached meanwhile: its wake (sdp_dconn_wake_mine) may have looked
	 * before this announcement. */
	if (sleep && !__atomic_load_n(&c->closed, __ATOMIC_SEQ_CST))
		return 1;
	withdraw(c, sl);
	return 0;
}

/* ---- ends ---------------------------------------------------------------------- */

void sdp_dconn_fin(struct sdp_dconn *c)
{
	struct sdp_ddir *d = &c->a->dir[c->side];
	if (side_lock(&d->tx_lock) != 0) {
		violation(c);
		return;
	}
	if (!LOADR(&d->fin)) {
		STORER(&d->fin_seq, LOADR(&d->tx_seq));
		STORE(&d->fin, 1);
	}
	side_unlock(&d->tx_lock);
	wake_data(c, d);
}

void sdp_dconn_reset(struct sdp_dconn *c)
{
	struct sdp_ddir *out = &c->a->dir[c->side], *in = &c->a->dir[1 - c->side];
	STORE(&out->reset, 1);
	wake_data(c, out);  /* the peer's reader */
	wake_space(c, in);  /* the peer's writer */
}

void sdp_dconn_close_rx(struct sdp_dconn *c)
{
	struct sdp_ddir *in = &c->a->dir[1 - c->side];
	STORE(&in->rx_closed, 1);
	wake_space(c, in);
}

void sdp_dconn_peer_gone(struct sdp_dconn *c)
{
	struct sdp_ddir *in = &c->a->dir[1 - c->side], *out = &c->a->dir[c->side];
	uint8_t *status = status_of(c, 1 - c->side);
	if (!LOAD(&in->fin) && !LOAD(&in->reset)) {
		/* The end of what the peer published: the FIN goes after the
		 * blocks waiting at the read cursor (side_lock keeps readers out
		 * while the count is taken). */
		if (side_lock(&in->rx_lock) != 0) {
			violation(c); /* a reset; the sleepers are woken below */
		} else {
			uint32_t idx = LOADR(&in->rx_next), seq = LOADR(&in->rx_seq);
			for (uint32_t k = 0; k < c->n; k++) {
				/* A block the peer died appending to holds what it
				 * published before and, when its length was written,
				 * the append (the payload goes before the length). */
				uint8_t *st = &status[idx & (c->n - 1)], filling = SDP_DBLK_FILLING;
				__atomic_compare_exchange_n(st, &filling, SDP_DBLK_DATA, 0, __ATOMIC_ACQ_REL,
							    __ATOMIC_RELAXED);
				const struct sdp_dblk *b = block_of(c, 1 - c->side, idx);
				/* The blocks in the order they were filled: a block
				 * read before (its seq behind: a full ring's last
				 * links back) ends them as an empty one does. */
				if (LOAD(st) != SDP_DBLK_DATA || LOADR(&b->seq) != seq)
					break;
				seq++;
				idx = next_index(c, idx, LOADR(&b->flags));
			}
			/* Bytes of ours it never read: the kernel would have reset. */
			const uint8_t *mine = status_of(c, c->side);
			int unread = 0;
			for (uint32_t k = 0; k < c->n && !unread; k++) {
				uint8_t st = LOAD(&mine[k]);
				unread = st == SDP_DBLK_DATA || st == SDP_DBLK_READING;
			}
			STORER(&in->fin_seq, seq);
			STORE(unread ? &in->reset : &in->fin, 1);
			side_unlock(&in->rx_lock);
		}
	}
	STORE(&out->rx_closed, 1);
	sdp_dconn_wake_mine(c); /* nobody else will wake them */
}

void sdp_dconn_wake_mine(struct sdp_dconn *c)
{
	/* What the caller stored before, then the count: a sleeper that
	 * announces after the look below finds the store in its re-check. */
	FENCE();
	if (__atomic_load_n(&c->sleeping, __ATOMIC_SEQ_CST) == 0)
		return;
	sdp_dconn_wake_all(c);
}

void sdp_dconn_wake_all(struct sdp_dconn *c)
{
	for (int d = 0; d < 2; d++) {
		struct sdp_ddir *x = &c->a->dir[d];
		__atomic_fetch_add(&x->data_word, 1, __ATOMIC_SEQ_CST);
		futex_wake(&x->data_word, INT_MAX);
		__atomic_fetch_add(&x->space_word, 1, __ATOMIC_SEQ_CST);
		futex_wake(&x->space_word, INT_MAX);
	}
}

uint64_t sdp_dconn_arrived(const struct sdp_dconn *c) { return LOADR(&c->a->dir[1 - c->side].tx_bytes); }

uint64_t sdp_dconn_nospace(const struct sdp_dconn *c) { return __atomic_load_n(&c->nospace, __ATOMIC_RELAXED); }

uint64_t sdp_dconn_want_nospace(struct sdp_dconn *c, uint32_t bell)
{
	merge_bell(&c->nospace_arm, bell); /* two sets' threads at once: both bells, merged */
	return __atomic_load_n(&c->nospace, __ATOMIC_SEQ_CST);
}

void sdp_dconn_mark_switched(struct sdp_dconn *c) { STORE(&c->a->dir[c->side].switched, 1); }

int sdp_dconn_switched(const struct sdp_dconn *c) { return LOAD(&c->a->dir[c->side].switched) == 1; }

int sdp_dconn_fin_sent(const struct sdp_dconn *c) { return LOAD(&c->a->dir[c->side].fin) != 0; }

int sdp_dconn_switching(const struct sdp_dconn *c)
{
	const struct sdp_ddir *mine = &c->a->dir[c->side], *peer = &c->a->dir[1 - c->side];
	return LOAD(&mine->switched) != 0 || LOAD(&mine->switch_req) != 0 || LOAD(&peer->switch_req) != 0;
}

int sdp_dconn_watch_holds(struct sdp_dconn *c)
{
	STORE(&c->a->dir[c->side].watch_holds, 1);
	FENCE();
	return LOAD(&c->a->dir[1 - c->side].watch_wants) == 1;
}

int sdp_dconn_watch_urgent(struct sdp_dconn *c)
{
	if (LOAD(&c->a->dir[1 - c->side].watch_holds) == 1)
		return 0;
	STORE(&c->a->dir[c->side].watch_wants, 1);
	FENCE();
	return LOAD(&c->a->dir[1 - c->side].watch_holds) != 1;
}

int sdp_dconn_ring_watcher(struct sdp_dconn *c) { return write_bell(c, SDP_DBELL_WATCHER); }

void sdp_dconn_request_switch(struct sdp_dconn *c) { STORE(&c->a->dir[c->side].switch_req, 1); }

int sdp_dconn_switch_requested(const struct sdp_dconn *c) { return LOAD(&c->a->dir[1 - c->side].switch_req) == 1; }

void sdp_dconn_set_window(struct sdp_dconn *c, uint32_t bytes)
{
	struct sdp_ddir *in = &c->a->dir[1 - c->side];
	STORE(&in->rx_window, bytes);
	wake_space(c, in);
}

/* ---- readiness ------------------------------------------------------------------- */

int sdp_dconn_poll(const struct sdp_dconn *c)
{
	const struct sdp_ddir *out = &c->a->dir[c->side], *in = &c->a->dir[1 - c->side];
	int ev = 0;
	if (c->broken || LOAD(&in->reset))
		return POLLIN | POLLOUT | POLLERR | POLLHUP | POLLRDHUP;
	int rdhup = LOAD(&in->fin) != 0;
	if (recv_ready(c) || rdhup)
		ev |= POLLIN;
	if (rdhup)
		ev |= POLLRDHUP;
	int wrdown = LOAD(&out->fin) || LOAD(&out->rx_closed);
	if (wrdown)
		ev |= POLLOUT; /* a write would not block: it fails with EPIPE */
	else if (send_room(c))
		ev |= POLLOUT;
	if (rdhup && wrdown)
		ev |= POLLHUP;
	return ev;
}

int sdp_dconn_arm(struct sdp_dconn *c, int events, uint32_t bell)
{
	sdp_dconn_watch_now(c);
	if (LOADR(&c->inherited))
		bell = 0; /* the peer holds the parent's bells, not this process's */
	if (events & POLLIN)
		arm_word(c, &c->a->dir[1 - c->side].data_armed, bell);
	if (events & POLLOUT)
		arm_word(c, &c->a->dir[c->side].space_armed, bell);
	FENCE();
	return sdp_dconn_poll(c) & (events | POLLERR | POLLHUP | POLLRDHUP);
}

int sdp_dconn_revents(struct sdp_dconn *c, int events)
{
	const struct sdp_ddir *out = &c->a->dir[c->side];
	int p = sdp_dconn_poll(c), rev = 0;
	if (p & (POLLIN | POLLERR | POLLHUP)) {
		char one;
		long r = sdp_dconn_recv(c, &one, 1, SDP_D_NONBLOCK | SDP_D_PEEK, NULL);
		if (r > 0) {
			rev |= POLLIN | POLLRDNORM;
		} else if (r == 0) {
			rev |= POLLIN | POLLRDNORM | POLLRDHUP;
			if (LOAD(&out->fin))
				rev |= POLLHUP;
		} else if (r != -EAGAIN) {
			rev |= POLLIN | POLLRDNORM | POLLRDHUP | POLLHUP;
			if (!__atomic_load_n(&c->errseen, __ATOMIC_RELAXED))
				rev |= POLLERR;
		}
	}
	if (events & (POLLOUT | POLLWRNORM | POLLWRBAND)) {
		if (LOAD(&out->fin) || (rev & POLLHUP) || (p & (POLLOUT | POLLERR | POLLHUP)))
			rev |= POLLOUT | POLLWRNORM;
		else
			count_nospace(c);
	}
	return rev & (events | POLLERR | POLLHUP);
}

uint32_t sdp_dconn_budget(const struct sdp_dconn *c) { return c->budget; }

void sdp_dconn_polled(struct sdp_dconn *c, uint32_t k)
{
	if (k > 0)
		budget_hit(c, k);
	else
		budget_miss(c);
}

void sdp_dconn_event_woke(struct sdp_dconn *c) { budget_woken(c); }

size_t sdp_dconn_inq(const struct sdp_dconn *c)
{
	int from = 1 - c->side;
	const struct sdp_ddir *d = &c->a->dir[from];
	const uint8_t *status = status_of(c, from);
	uint32_t idx = LOADR(&d->rx_next), seq = LOADR(&d->rx_seq), off = LOADR(&d->rx_off), room = c->s - HDR;
	size_t n = 0;
	for (uint32_t seen = 0; seen < c->n; seen++) {
		uint8_t st = LOAD(&status[idx & (c->n - 1)]);
		if (st == SDP_DBLK_RETAINED) {
			idx++;
			continue;
		}
		if (st != SDP_DBLK_DATA)
			break;
		const struct sdp_dblk *b = block_of(c, from, idx);
		uint32_t len = LOADR(&b->len);
		if (len > room || off > len || LOADR(&b->seq) != seq)
			break; /* garbage, or a block read before (a full ring's last links back) */
		n += len - off;
		off = 0;
		seq++;
		idx = next_index(c, idx, LOADR(&b->flags));
	}
	return n;
}

/* Gives back the whole pages of blocks [p, q) of this side's direction;
 * returns their bytes. */
static size_t punch(const struct sdp_dconn *c, uint32_t p, uint32_t q)
{
	uintptr_t page = (uintptr_t)getauxval(AT_PAGESZ);
	if (page == 0 || (page & (page - 1)) != 0)
		return 0;
	uintptr_t start = (uintptr_t)block_of(c, c->side, p), end = (uintptr_t)block_of(c, c->side, q - 1) + c->s;
	start = (start + page - 1) & ~(page - 1);
	end &= ~(page - 1);
	if (end <= start || syscall(SYS_madvise, (void *)start, end - start, MADV_REMOVE) != 0)
		return 0;
	return end - start;
}

size_t sdp_dconn_trim(struct sdp_dconn *c, uint32_t keep)
{
	struct sdp_ddir *d = &c->a->dir[c->side];
	uint32_t seq = LOADR(&d->tx_seq);
	if (seq == LOADR(&c->trim_seq) || keep >= c->n)
		return 0; /* nothing filled since a trim that left no block in flight */
	if (!c->trim_looked || seq != c->trim_mark) {
		c->trim_mark = seq; /* filled since the last look: not quiet yet */
		c->trim_looked = 1;
		return 0;
	}
	uint32_t z = 0;
	if (!__atomic_compare_exchange_n(&d->tx_lock, &z, sdp_dconn_pid(), 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return 0;
	size_t given = 0;
	if (LOADR(&d->tx_seq) == seq) {
		const uint8_t *status = status_of(c, c->side);
		int flight = 0; /* a block still unread: look again next time */
		for (uint32_t p = keep; p < c->n;) {
			if (LOAD(&status[p]) != SDP_DBLK_EMPTY) {
				flight = 1;
				p++;
				continue;
			}
			uint32_t q = p;
			while (q < c->n && LOAD(&status[q]) == SDP_DBLK_EMPTY)
				q++;
			given += punch(c, p, q);
			p = q;
		}
		if (!flight)
			STORER(&c->trim_seq, seq);
		__atomic_fetch_add(&c->trimmed, given, __ATOMIC_RELAXED);
	}
	side_unlock(&d->tx_lock);
	return given;
}

size_t sdp_dconn_outq(const struct sdp_dconn *c)
{
	const struct sdp_ddir *d = &c->a->dir[c->side];
	uint64_t tx = LOADR(&d->tx_bytes), rx = LOADR(&d->rx_bytes);
	/* rx_bytes is the peer's to write: never more than a direction holds */
	uint64_t q = rx < tx ? tx - rx : 0, most = (uint64_t)c->n * (c->s - HDR);
	return (size_t)(q < most ? q : most);
}
