/*
 * tenant.c - the tenant gate (tenant.h): turns for bulk sub-writes, and
 * how many of them a process may hold while other processes of its user
 * send bulk data too.
 *
 * Turns. A blocking bulk sub-write (a send of a block or more, preemption
 * on, no send timeout) holds one of the process's turns while it copies;
 * turns [0, cap) may be held. A holder keeps its turn across sub-writes
 * and sends, so the fast path is a look at its own turn and a store of the
 * time. While other threads wait for a turn, a holder gives its turn up
 * after TURN_SLICE_NS, so the bulk streams of one process take turns,
 * and for TURN_HANDOFF_NS only another thread may take a turn it gave
 * up. A turn whose holder made no sub-write for TURN_STALE_NS (its program
 * stopped sending, or closed the connection) is anyone's, and so is one
 * whose holder's last sub-write was on the taking thread (which copies on
 * one connection at a time).
 *
 * The cap. No other process of the user sending bulk data (no fresh entry
 * on the board with a demand): every turn, so a process alone never
 * waits for one unless it has more than TURNS bulk senders. Otherwise the
 * most either of
 *   - the least demand among the others (the streams one of them wants
 *     to send bulk data on): a process may run as many bulk streams at
 *     once as the smallest other tenant, so a tenant of one stream beside
 *     one of sixteen gets half the bulk copying, not a seventeenth;
 *   - the CPUs this thread may run on over twice the sending processes
 *     (a bulk stream keeps two threads busy, its writer and its reader):
 *     where there are CPUs enough for more, capping at the least demand
 *     would leave them idle. On 2 CPUs and two tenants that is 0.
 * and at least 1. A demand is the process's holders with a fresh
 * sub-write plus its waiters.
 *
 * Every sleep is timed: until the first held turn would go stale, at
 * most TURN_WAIT_NS; a signal whose handler does not restart calls ends
 * it (the sub-write then goes ahead without a turn). So a turn held by a
 * thread that died or stopped sending, a board full of garbage or a lost
 * wake costs time, never a hang. A fork child starts with no turns
 * (sdp_tenant_forget, from the interposer's fork) and, since the board's
 * fd was given to its parent, without the board.
 *
 * The starved mark. direct.c's preemption pauses a process's bulk sends
 * while a small message of the same process was late lately; a small
 * message late beside another process's bulk stream (two applications)
 * needs that process to give way. So a process whose small message was
 * late says so in the board's header (its pid and the time, at most every
 * STARVED_EVERY_NS), and each look of a bulk sender reads the mark of
 * another process with the entries (sdp_tenant_starved_within): direct.c
 * pauses on it as on its own. Every scheduling point peeks at the mark
 * alone (sdp_tenant_peek) when no look read it lately: a sender that
 * takes no turns (a send timeout, the shared channel) reads it so. The board holds one mark: a
 * process whose own small messages are late, which its own bulk sends
 * do not pause for, writes over another's, and reads its own then. */
#define _GNU_SOURCE 1
#include "tenant.h"
#include "direct.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TURNS 256
#define TURN_SLICE_NS 2000000L   /* a holder's turn while others wait */
#define TURN_HANDOFF_NS 1000000L /* a turn given up goes to another thread first */
#define TURN_STALE_NS 1000000L   /* a turn unused this long is anyone's */
#define TURN_WAIT_NS 5000000L    /* a waiter looks again at least this often */
#define TURN_NAP_NS 50000L       /* and at most this often */
#define BOARD_EVERY_NS 1000000L  /* the board is read and written at most this often */
#define BOARD_ALONE_NS 10000000L /* and while it showed no other sender, this often */
#define BOARD_FRESH_NS 100000000L /* an entry older than this is of a process that stopped */
#define BOARD_DEAD_NS 1000000000L /* an entry this old (or this far ahead) may be taken by another process */
#define STARVED_EVERY_NS 5000000L /* a process's starved mark goes onto the board at most this often */

_Static_assert(offsetof(struct sdp_board, starved_ns) == offsetof(struct sdp_board, starved_pid) + sizeof(uint32_t),
	       "the starved mark is one pwrite (a read beside it may still see half of it: one wrong pause at worst)");
_Static_assert(offsetof(struct sdp_board, entry) == 64, "the header is 64 bytes");

#define LD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define ST(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

struct turn {
	const struct sdp_dconn *owner; /* NULL: free */
	const struct sdp_dconn *from;  /* who gave it up last, at since */
	uintptr_t thread;              /* the thread of the holder's last sub-write */
	int64_t since;                 /* when taken or given up */
	int64_t used;                  /* the holder's last sub-write */
};

static struct {
	uint32_t word;    /* bumped when a turn is given up or the cap grows; waiters sleep on it */
	uint32_t waiters; /* threads waiting for a turn */
	uint32_t cap;     /* turns [0, cap) may be held */
	uint32_t top;     /* turns [top, TURNS) were never held */
	uint32_t looking; /* 1: a thread reads the board */
	uint32_t entry;   /* 1 + this process's entry on the board; 0: none */
	uint32_t alone;   /* 1: the last look found no other sender */
	int64_t looked;   /* when the board was last read */
	int64_t told;     /* when this process last put its starved mark on the board */
	int64_t far;      /* another process's starved mark, as the last look read it; 0: none */
	int64_t peeked;   /* when the mark was last read (a look or sdp_tenant_peek) */
	struct turn turn[TURNS];
} g = {.cap = TURNS};

static struct sdp_board board; /* the last read, under g.looking */

void sdp_tenant_forget(void)
{
	/* A gate never used has nothing to forget: no write, so the child
	 * copies none of its pages. */
	if (LD(&g.looked) == 0 && LD(&g.top) == 0 && LD(&g.waiters) == 0 && LD(&g.told) == 0 && LD(&g.peeked) == 0)
		return;
	memset(&g, 0, sizeof g);
	g.cap = TURNS;
}

/* now - then, for times another process may have written: wraps rather
 * than overflows. */
static int64_t age(int64_t now, int64_t then) { return (int64_t)((uint64_t)now - (uint64_t)then); }

static uint32_t ncpus(void)
{
	static uint32_t n;
	uint32_t v = LD(&n);
	if (v == 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		v = syscall(SYS_sched_getaffinity, 0, sizeof set, &set) > 0 ? (uint32_t)CPU_COUNT(&set) : 1;
		if (v == 0)
			v = 1;
		ST(&n, v);
	}
	return v;
}

/* The mark (pid, ns) as another process's (0: this process's own, or
 * none). */
static int64_t far_mark(uint32_t pid, int64_t ns, uint32_t me) { return pid != 0 && pid != me ? ns : 0; }

/* The turns held and used lately. */
static uint32_t held(int64_t now)
{
	uint32_t n = 0, top = LD(&g.top);
	for (uint32_t i = 0; i < top && i < TURNS; i++)
		if (LD(&g.turn[i].owner) != NULL && age(now, LD(&g.turn[i].used)) < TURN_STALE_NS)
			n++;
	return n;
}

/* The streams this process wants to send bulk data on now: those holding
 * a turn and those waiting for one. */
static uint32_t demand(int64_t now) { return held(now) + LD(&g.waiters); }

/* Writes this process's entry (me, want) and returns the cap the others'
 * entries give it (above); TURNS when the board cannot be read or holds
 * no other sender. */
static uint32_t board_cap(int fd, uint32_t me, uint32_t want)
{
	if (syscall(SYS_pread64, fd, &board, sizeof board, 0) != (long)sizeof board || board.magic != SDP_BOARD_MAGIC ||
	    board.version != SDP_BOARD_VERSION || board.entries != SDP_BOARD_ENTRIES) {
		ST(&g.alone, 1);
		ST(&g.far, 0);
		return TURNS;
	}
	/* After the read: an entry written before it is not in the future. */
	int64_t now = sdp_now_ns();
	ST(&g.far, far_mark(board.starved_pid, board.starved_ns, me));
	ST(&g.peeked, now); /* the mark is as fresh as a peek's */
	uint32_t mine = g.entry;
	if (mine == 0 || mine > SDP_BOARD_ENTRIES || board.entry[mine - 1].pid != me) {
		/* Its pid's entry, else a free one or one silent for a second:
		 * two processes that take the same at once see it at their next
		 * look and one moves on. */
		mine = 0;
		for (uint32_t i = 0; i < SDP_BOARD_ENTRIES && mine == 0; i++)
			if (board.entry[i].pid == me)
				mine = i + 1;
		for (uint32_t i = 0; i < SDP_BOARD_ENTRIES && mine == 0; i++) {
			int64_t a = age(now, board.entry[i].beat_ns);
			if (board.entry[i].pid == 0 || a >= BOARD_DEAD_NS || a <= -BOARD_DEAD_NS)
				mine = i + 1;
		}
		g.entry = mine;
	}
	if (mine != 0) {
		struct sdp_board_entry e = {.pid = me, .demand = want, .beat_ns = now};
		off_t at = (off_t)(offsetof(struct sdp_board, entry) + (mine - 1) * sizeof e);
		(void)syscall(SYS_pwrite64, fd, &e, sizeof e, at);
	}
	uint32_t others = 0, least = TURNS;
	for (uint32_t i = 0; i < SDP_BOARD_ENTRIES; i++) {
		const struct sdp_board_entry *e = &board.entry[i];
		int64_t a = age(now, e->beat_ns);
		if (i + 1 == mine || e->pid == 0 || e->pid == me || e->demand == 0 || a < 0 || a >= BOARD_FRESH_NS)
			continue;
		others++;
		if (e->demand < least)
			least = e->demand;
	}
	ST(&g.alone, others == 0);
	if (others == 0)
		return TURNS;
	uint32_t cap = ncpus() / (2 * (others + 1));
	if (cap < least)
		cap = least;
	return cap < 1 ? 1 : cap > TURNS ? TURNS : cap;
}

/* Reads the board through c's fd, at most every BOARD_EVERY_NS (every
 * BOARD_ALONE_NS while no other process sends: a newcomer sees this
 * process's entry at its first look, and this one sees the newcomer's
 * within that time) and one thread at a time, and sets the cap. */
static void look(const struct sdp_dconn *c, int64_t now)
{
	int64_t at = LD(&g.looked);
	if (at != 0 && now - at < (LD(&g.alone) ? BOARD_ALONE_NS : BOARD_EVERY_NS))
		return;
	if (__atomic_exchange_n(&g.looking, 1, __ATOMIC_ACQUIRE) != 0)
		return;
	ST(&g.looked, now);
	uint32_t me = sdp_dconn_pid();
	int fd = LD(&c->board_fd);
	/* A handle without this process's board (none, or a fork child's
	 * copy of its parent's) leaves the cap as the last board said. */
	if (fd >= 0 && LD(&c->board_pid) == me) {
		uint32_t want = demand(now);
		uint32_t cap = board_cap(fd, me, want > 0 ? want : 1); /* the caller wants one at least */
		if (__atomic_exchange_n(&g.cap, cap, __ATOMIC_ACQ_REL) < cap) {
			__atomic_fetch_add(&g.word, 1, __ATOMIC_RELEASE);
			syscall(SYS_futex, &g.word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
		}
	}
	__atomic_store_n(&g.looking, 0, __ATOMIC_RELEASE);
}

/* Takes a turn below cap for c, on thread self: a free one (not one c
 * gave up within TURN_HANDOFF_NS), a stale one, or one this thread holds
 * for another connection (it copies on one at a time: a single-threaded
 * program that writes to its connections in turn would otherwise wait
 * for its own turn to go stale at each). 1 when it did. */
static int take(struct sdp_dconn *c, uintptr_t self, uint32_t cap, int64_t now)
{
	for (uint32_t i = 0; i < cap && i < TURNS; i++) {
		struct turn *t = &g.turn[i];
		const struct sdp_dconn *o = LD(&t->owner);
		if (o == NULL) {
			if (LD(&t->from) == c && age(now, LD(&t->since)) < TURN_HANDOFF_NS)
				continue;
		} else if (o != c && LD(&t->thread) != self && age(now, LD(&t->used)) < TURN_STALE_NS) {
			continue;
		}
		if (o != c && !__atomic_compare_exchange_n(&t->owner, &o, c, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			continue;
		ST(&t->thread, self);
		ST(&t->used, now);
		ST(&t->since, now);
		ST(&t->from, NULL);
		ST(&c->turn, i + 1);
		uint32_t top = LD(&g.top);
		while (top < i + 1 && !__atomic_compare_exchange_n(&g.top, &top, i + 1, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			;
		return 1;
	}
	return 0;
}

/* c gives up turn t, which it holds: a waiter is woken to take it. */
static void give_up(struct turn *t, const struct sdp_dconn *c, int64_t now)
{
	ST(&t->from, c);
	ST(&t->since, now);
	const struct sdp_dconn *o = c;
	if (!__atomic_compare_exchange_n(&t->owner, &o, NULL, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return; /* taken from it as stale meanwhile */
	__atomic_fetch_add(&g.word, 1, __ATOMIC_RELEASE);
	if (LD(&g.waiters) != 0)
		syscall(SYS_futex, &g.word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* How long a waiter sleeps: until the first turn below cap held now
 * would go stale (its holder may have stopped sending: nobody gives that
 * turn up), between TURN_NAP_NS and TURN_WAIT_NS. */
static long nap(uint32_t cap, int64_t now)
{
	int64_t ns = TURN_WAIT_NS;
	for (uint32_t i = 0; i < cap && i < LD(&g.top) && i < TURNS; i++) {
		if (LD(&g.turn[i].owner) == NULL)
			continue;
		int64_t left = TURN_STALE_NS - age(now, LD(&g.turn[i].used));
		if (left < ns)
			ns = left;
	}
	return ns < TURN_NAP_NS ? TURN_NAP_NS : ns;
}

uint32_t sdp_tenant_enter(struct sdp_dconn *c)
{
	int saved = errno; /* the send's caller sees the send's errno, not the board's or a sleep's */
	int64_t now = sdp_now_ns();
	look(c, now);
	uint32_t cap = LD(&g.cap), i = LD(&c->turn);
	uintptr_t self = (uintptr_t)pthread_self();
	if (i > 0 && i <= TURNS && LD(&g.turn[i - 1].owner) == c) {
		struct turn *t = &g.turn[i - 1];
		if (i <= cap && (age(now, LD(&t->since)) < TURN_SLICE_NS || LD(&g.waiters) == 0)) {
			if (LD(&t->thread) != self)
				ST(&t->thread, self);
			ST(&t->used, now);
			errno = saved;
			return 0;
		}
		give_up(t, c, now); /* its slice is over while others wait, or the cap fell below it */
	}
	uint32_t waits = 0;
	int waiting = 0;
	for (;;) {
		if (take(c, self, cap, now))
			break;
		if (!waiting) {
			__atomic_fetch_add(&g.waiters, 1, __ATOMIC_ACQ_REL);
			waiting = 1;
		}
		uint32_t w = LD(&g.word);
		if (take(c, self, LD(&g.cap), sdp_now_ns()))
			break;
		struct timespec ts = {0, nap(LD(&g.cap), sdp_now_ns())};
		long r = syscall(SYS_futex, &g.word, FUTEX_WAIT_PRIVATE, w, &ts, NULL, 0);
		waits++;
		if (r < 0 && errno == EINTR)
			break; /* a signal: the sub-write goes ahead without a turn */
		now = sdp_now_ns();
		look(c, now);
		cap = LD(&g.cap);
	}
	if (waiting)
		__atomic_fetch_sub(&g.waiters, 1, __ATOMIC_ACQ_REL);
	errno = saved;
	return waits;
}

/* Whether a board access made at most every `every` ns, last at *last,
 * is due at now through fd (given to process fd_pid): not without a
 * board, nor for a fork child's copy of its parent's. The one thread that
 * finds it due claims it. */
static int due(int64_t *last, int64_t every, int fd, uint32_t fd_pid, int64_t now)
{
	if (fd < 0)
		return 0;
	int64_t at = LD(last);
	if (at != 0 && age(now, at) < every)
		return 0;
	if (!__atomic_compare_exchange_n(last, &at, now, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return 0; /* another thread makes it */
	return fd_pid == sdp_dconn_pid();
}

void sdp_tenant_starved(int fd, uint32_t fd_pid, int64_t now)
{
	if (!due(&g.told, STARVED_EVERY_NS, fd, fd_pid, now))
		return;
	uint32_t me = fd_pid;
	unsigned char mark[sizeof(uint32_t) + sizeof(int64_t)]; /* starved_pid, starved_ns: one write */
	memcpy(mark, &me, sizeof me);
	memcpy(mark + sizeof me, &now, sizeof now);
	int saved = errno;
	(void)syscall(SYS_pwrite64, fd, mark, sizeof mark, (off_t)offsetof(struct sdp_board, starved_pid));
	errno = saved;
}

int sdp_tenant_starved_within(int64_t now, int64_t window)
{
	int64_t far = LD(&g.far);
	int64_t a = age(now, far);
	return far != 0 && a >= 0 && a < window;
}

void sdp_tenant_peek(int fd, uint32_t fd_pid, int64_t now)
{
	int64_t every = sdp_tenant_starved_within(now, BOARD_FRESH_NS) ? BOARD_EVERY_NS : BOARD_ALONE_NS;
	if (!due(&g.peeked, every, fd, fd_pid, now))
		return;
	uint32_t me = fd_pid;
	struct {
		uint32_t magic, version, entries, starved_pid;
		int64_t starved_ns;
	} head; /* the board's first bytes, up to the mark's end */
	_Static_assert(sizeof head == offsetof(struct sdp_board, starved_ns) + sizeof(int64_t), "the header's first bytes");
	int saved = errno;
	long r = syscall(SYS_pread64, fd, &head, sizeof head, 0);
	errno = saved;
	int ok = r == (long)sizeof head && head.magic == SDP_BOARD_MAGIC && head.version == SDP_BOARD_VERSION &&
		 head.entries == SDP_BOARD_ENTRIES;
	ST(&g.far, ok ? far_mark(head.starved_pid, head.starved_ns, me) : 0);
}

void sdp_tenant_state(uint32_t *cap, uint32_t *nheld, uint32_t *waiting)
{
	*cap = LD(&g.cap);
	*nheld = held(sdp_now_ns());
	*waiting = LD(&g.waiters);
}
