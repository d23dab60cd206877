/*
 * epollfast.c - epoll waits over direct connections answered by the
 * interposer alone, without entering the core.
 *
 * The core publishes a snapshot of an emulated set (struct sdpshim_eset:
 * its level- and edge-triggered socket entries and the tokens of its own kernel
 * registrations) whenever it has waited on the set itself, and marks it
 * stale at every change. A wait on a set whose snapshot is fresh, and
 * whose entries are all direct connections in their plain state goes as
 * poll.c's does: readiness from the shared areas (sdp_dconn_revents), the
 * adaptive budget, then the arm and a last look, then the kernel's
 * epoll_wait on the program's set, which holds the program's kernel fds
 * and, under the core's tokens, the sockets themselves (the peers' rings
 * are bytes on them) and the set's kick eventfd. The kernel's answer loses the
 * tokens' events and gains the sockets that are ready. Anything else
 * (a stale snapshot, a socket connecting, shut down for reading, falling
 * back or switching) hands the wait to the core, with what the kernel
 * returned when it already slept.
 *
 * Tables are read under a user count: the core's publish swaps the pointer
 * and waits for the count of the old one to drop to zero before it frees
 * it; a reader counts itself in, then checks that the pointer still names
 * the table it counted (Dekker, as the handles').
 */
#include "direct.h"
#include "shim.h"
#include "sigcount.h"

#include <sched.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

static struct sdp_fd_ptrs sdp_es;

void sdp_epoll_forget_all(void) { sdp_fd_ptr_clear_all(&sdp_es); }

/* Marks t stale and wakes its sleepers. Stale, then look for sleepers; a
 * sleeper counts itself in, then looks at stale before it sleeps (Dekker):
 * one of the two sees the other. The core calls this with the set alive,
 * so kick_efd is open. */
static void sdp_es_kick(struct sdpshim_eset *t)
{
	__atomic_store_n(&t->stale, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&t->sleepers, __ATOMIC_SEQ_CST) != 0 && t->kick_efd >= 0) {
		uint64_t one = 1;
		syscall(SYS_write, t->kick_efd, &one, sizeof one);
	}
}

struct sdpshim_eset *sdp_epoll_publish(int epfd, struct sdpshim_eset *t)
{
	void **slot = sdp_fd_ptr_slot(&sdp_es, epfd, t != NULL);
	if (slot == NULL)
		return t; /* no table: every wait goes through the core */
	struct sdpshim_eset *old = __atomic_exchange_n((struct sdpshim_eset **)slot, t, __ATOMIC_SEQ_CST);
	if (old != NULL) {
		sdp_es_kick(old); /* a sleeper holding it lets it go */
		for (unsigned int k = 0; __atomic_load_n(&old->users, __ATOMIC_SEQ_CST) != 0; k++)
			if (k > 64)
				sched_yield();
	}
	return old;
}

void sdp_epoll_stale(int epfd)
{
	void **slot = sdp_fd_ptr_slot(&sdp_es, epfd, 0);
	struct sdpshim_eset *t = slot ? __atomic_load_n((struct sdpshim_eset **)slot, __ATOMIC_SEQ_CST) : NULL;
	if (t != NULL)
		sdp_es_kick(t);
}

/* The fresh table of epfd, counted in (sdp_es_put), or NULL. */
static struct sdpshim_eset *sdp_es_get(int epfd)
{
	void **slot = sdp_fd_ptr_slot(&sdp_es, epfd, 0);
	if (slot == NULL)
		return NULL;
	for (;;) {
		struct sdpshim_eset *t = __atomic_load_n((struct sdpshim_eset **)slot, __ATOMIC_SEQ_CST);
		if (t == NULL)
			return NULL;
		__atomic_fetch_add(&t->users, 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n((struct sdpshim_eset **)slot, __ATOMIC_SEQ_CST) == t) {
			if (!__atomic_load_n(&t->stale, __ATOMIC_SEQ_CST))
				return t;
			__atomic_fetch_sub(&t->users, 1, __ATOMIC_SEQ_CST);
			return NULL;
		}
		__atomic_fetch_sub(&t->users, 1, __ATOMIC_SEQ_CST);
	}
}

static void sdp_es_put(struct sdpshim_eset *t) { __atomic_fetch_sub(&t->users, 1, __ATOMIC_SEQ_CST); }

static void sdp_es_unpark(struct sdpshim_eset *t, uint32_t i);
static void sdp_es_changed(struct sdpshim_eset *t);

/* Where sdp_epoll_update last found each fd's entry, direct-mapped by fd:
 * a hint, checked against the table before use. An fd is in a set at most
 * once and a table's entries never move, so an entry of the fd at the
 * hinted index is the one; a hint of another set, another table or a
 * colliding fd only costs the search it would have saved. Without it an
 * update searched the whole table: a set of many connections paid for all
 * of them at every EPOLL_CTL_MOD. */
#define SDP_ES_HINTS 16384
static uint32_t sdp_es_hint[SDP_ES_HINTS];

/* The index of fd's entry in t's first n, or n when it has none. */
static uint32_t sdp_es_find(const struct sdpshim_eset *t, uint32_t n, int fd)
{
	uint32_t *hint = &sdp_es_hint[(unsigned)fd % SDP_ES_HINTS];
	uint32_t i = __atomic_load_n(hint, __ATOMIC_RELAXED);
	if (i < n && t->ent[i].fd == fd)
		return i;
	for (i = 0; i < n; i++)
		if (t->ent[i].fd == fd) {
			__atomic_store_n(hint, i, __ATOMIC_RELAXED);
			return i;
		}
	return n;
}

int sdp_epoll_update(int epfd, int fd, uint32_t events, uint64_t data)
{
	struct sdpshim_eset *t = sdp_es_get(epfd);
	if (t == NULL)
		return 0;
	uint32_t n = __atomic_load_n(&t->n, __ATOMIC_SEQ_CST);
	uint32_t i = sdp_es_find(t, n, fd);
	struct sdpshim_eset_entry *e = i < n ? &t->ent[i] : NULL;
	if (e == NULL || e->data != data) {
		sdp_es_put(t);
		return 0;
	}
	uint32_t old = __atomic_exchange_n(&e->events, events, __ATOMIC_SEQ_CST);
	sdp_es_unpark(t, i); /* its arm was for the old events */
	if (events & ~old)
		sdp_es_changed(t); /* it looks again with the new events */
	sdp_es_put(t);
	return 1;
}

/* A change that may make an entry ready which a thread's last scan did
 * not know of: the generation moves, then a sleeper is kicked. Changed,
 * then look for sleepers; a thread that scanned before the change sees
 * the generation move when it counts itself a sleeper
 * (sdp_epoll_sleep_begin), one asleep is kicked: either way it looks
 * again. */
static void sdp_es_changed(struct sdpshim_eset *t)
{
	__atomic_fetch_add(&t->gen, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&t->sleepers, __ATOMIC_SEQ_CST) != 0 && t->kick_efd >= 0) {
		uint64_t one = 1;
		syscall(SYS_write, t->kick_efd, &one, sizeof one);
	}
}

int sdp_epoll_append(int epfd, const struct sdpshim_eset_entry *entry)
{
	struct sdpshim_eset *t = sdp_es_get(epfd);
	if (t == NULL)
		return 0;
	/* The core appends under its set's lock: one writer. Readers load n
	 * and ntok once per look; what they index below them is written
	 * before they move (SEQ_CST stores). */
	uint32_t n = __atomic_load_n(&t->n, __ATOMIC_RELAXED), nt = __atomic_load_n(&t->ntok, __ATOMIC_RELAXED);
	if (n >= t->cap || (nt > 0 && t->tok[nt - 1] >= entry->token)) {
		sdp_es_put(t);
		return 0;
	}
	struct sdpshim_eset_entry *e = &t->ent[n];
	*e = *entry;
	e->idle_since = 0;
	e->idle = 0;
	/* Its parked bit is clear: the table came zeroed, and no entry at n
	 * was ever parked. */
	t->tok[nt] = entry->token;
	t->tokent[nt] = n + 1;
	__atomic_store_n(&t->ntok, nt + 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&t->n, n + 1, __ATOMIC_SEQ_CST);
	sdp_es_changed(t);
	sdp_es_put(t);
	return 1;
}

/* The handle of entry e when the interposer may answer for it, held. */
static struct sdp_dconn *sdp_es_conn(const struct sdpshim_eset_entry *e) { return sdp_direct_poll_get(e->fd); }

/* What entry e of handle c reports now: its readiness, and for EPOLLET
 * only an edge since the last evaluation, which it records (as the
 * core's evaluate in shim/epoll.go). Arrivals are read before the
 * readiness: bytes that come between the two are reported again next time
 * rather than lost. */
static int sdp_es_eval(struct sdpshim_eset_entry *e, struct sdp_dconn *c, int commit)
{
	uint32_t events = __atomic_load_n(&e->events, __ATOMIC_RELAXED);
	if (!(events & EPOLLET))
		return sdp_dconn_revents(c, (int)(events & 0xffff));
	uint64_t arr = sdp_dconn_arrived(c);
	int rev = sdp_dconn_revents(c, (int)(events & 0xffff));
	uint32_t ns = e->ns_base + (uint32_t)sdp_dconn_nospace(c);
	uint32_t last = __atomic_load_n(&e->last_mask, __ATOMIC_RELAXED);
	int edge = ((uint32_t)rev & ~last) != 0 ||
		   ((rev & POLLIN) && arr > __atomic_load_n(&e->last_arr, __ATOMIC_RELAXED)) ||
		   ((rev & POLLOUT) && ns != __atomic_load_n(&e->last_ns, __ATOMIC_RELAXED));
	if (commit) {
		__atomic_store_n(&e->last_mask, (uint32_t)rev, __ATOMIC_RELAXED);
		__atomic_store_n(&e->last_arr, arr, __ATOMIC_RELAXED);
		if (rev & POLLOUT)
			__atomic_store_n(&e->last_ns, ns, __ATOMIC_RELAXED);
	}
	return edge ? rev : 0;
}

/* ---- parking: a wait costs O(ready entries), not O(entries) ----------------
 *
 * An entry found not ready in SDP_ES_PARK_AFTER waits in a row, over at
 * least SDP_ES_PARK_NS, is parked (a connection with a request in flight
 * among many busy ones is not ready in many waits in a row too, but comes
 * back within a round trip: it stays scanned, and its peer's publishes
 * ring nothing while the set is busy):
 * armed to ring its socket (which the core registered in the kernel's set
 * under the entry's token), then left out of the scans and of the arms
 * before a sleep. Its peer's next publish rings the socket, and the wait
 * that gets the token from the kernel (after a sleep, or in the looks at
 * the kernel's set while busy) unparks it. The order: mark parked, arm,
 * look again (an edge or readiness found there unparks it at once);
 * a publish is either seen by that look or rings after the arm (Dekker,
 * as every arm). An unpark only ever makes an entry scanned again, which
 * is always safe; a parked entry whose arm a ring spent has its token on
 * its way. A fresh snapshot starts with every entry unparked: the core's
 * own waits read the kernel's set, tokens included. */
#define SDP_ES_PARK_AFTER 16
#define SDP_ES_PARK_NS 2000000

static int sdp_es_parked(const struct sdpshim_eset *t, uint32_t i)
{
	return (__atomic_load_n(&t->parked[i / 64], __ATOMIC_SEQ_CST) >> (i % 64)) & 1;
}

static void sdp_es_unpark(struct sdpshim_eset *t, uint32_t i)
{
	__atomic_store_n(&t->ent[i].idle, 0, __ATOMIC_RELAXED);
	if (sdp_es_parked(t, i))
		__atomic_fetch_and(&t->parked[i / 64], ~(1ULL << (i % 64)), __ATOMIC_SEQ_CST);
}

/* The events entry e arms for: what it asks, less room for an
 * edge-triggered entry found writable, whose next writable edge needs a
 * write that finds none first; that write arms the room itself
 * (sdp_dconn_send, once sdp_dconn_want_nospace asked it to, with bell; a
 * write that found none since the evaluation: armed here). So the peer's
 * reads, which make room, ring no sleeper whose socket never filled. */
static int sdp_es_want(const struct sdpshim_eset_entry *e, struct sdp_dconn *c, uint32_t bell)
{
	uint32_t want = __atomic_load_n(&e->events, __ATOMIC_RELAXED);
	if ((want & EPOLLET) && (__atomic_load_n(&e->last_mask, __ATOMIC_RELAXED) & POLLOUT) &&
	    e->ns_base + (uint32_t)sdp_dconn_want_nospace(c, bell) == __atomic_load_n(&e->last_ns, __ATOMIC_RELAXED))
		want &= ~(uint32_t)(EPOLLOUT | EPOLLWRNORM | EPOLLWRBAND);
	return ((want & (EPOLLIN | EPOLLRDNORM | EPOLLRDHUP)) ? POLLIN : 0) |
	       ((want & (EPOLLOUT | EPOLLWRNORM | EPOLLWRBAND)) ? POLLOUT : 0);
}

/* Parks entry i (handle c), found not ready; -1 when a drain of its
 * rings met a switch record. */
static int sdp_es_park(struct sdpshim_eset *t, uint32_t i, struct sdp_dconn *c)
{
	struct sdpshim_eset_entry *e = &t->ent[i];
	int want = sdp_es_want(e, c, 0);
	if (want == 0)
		return 0; /* only its errors and hang-ups: stays scanned */
	if (sdp_dconn_drain_due(c) && sdp_dconn_drain(c, e->fd) != 0)
		return -1;
	__atomic_fetch_or(&t->parked[i / 64], 1ULL << (i % 64), __ATOMIC_SEQ_CST);
	sdp_dconn_arm(c, want, 0); /* bell 0: a ring on the socket */
	if (sdp_es_eval(e, c, 0) != 0)
		sdp_es_unpark(t, i);
	return 0;
}

/* The first unparked entry in [i, end), or end: a word of the bitmap per
 * 64 entries, so a scan costs O(unparked) plus n / 64. */
static uint32_t sdp_es_active(const struct sdpshim_eset *t, uint32_t i, uint32_t end)
{
	while (i < end) {
		uint64_t unparked = ~__atomic_load_n(&t->parked[i / 64], __ATOMIC_SEQ_CST) >> (i % 64);
		if (unparked != 0) {
			i += (uint32_t)__builtin_ctzll(unparked);
			return i < end ? i : end;
		}
		i = (i / 64 + 1) * 64;
	}
	return end;
}

/* Writes the ready unparked entries' events into ev (up to max), from the
 * rotating start; -1 when an entry is not the interposer's to answer.
 * count: this scan is a wait's first look, or its look after a sleep
 * (not a poll of its budget): entries found not ready count it, and park
 * after SDP_ES_PARK_AFTER in a row. */
static int sdp_es_scan(struct sdpshim_eset *t, struct epoll_event *ev, int max, int count)
{
	uint32_t n = __atomic_load_n(&t->n, __ATOMIC_SEQ_CST), start = n ? __atomic_load_n(&t->rot, __ATOMIC_RELAXED) % n : 0;
	int got = 0;
	int64_t now = 0; /* read once an entry is found not ready */
	for (int pass = 0; pass < 2; pass++) {
		uint32_t hi = pass == 0 ? n : start;
		for (uint32_t j = sdp_es_active(t, pass == 0 ? start : 0, hi); j < hi && got < max;
		     j = sdp_es_active(t, j + 1, hi)) {
			struct sdpshim_eset_entry *e = &t->ent[j];
			struct sdp_dconn *c = sdp_es_conn(e);
			if (c == NULL)
				return -1;
			int rev = sdp_es_eval(e, c, 1);
			if (rev == 0) {
				int bad = 0;
				uint32_t idle = count ? __atomic_add_fetch(&e->idle, 1, __ATOMIC_RELAXED) : 0;
				if (idle > 0 && now == 0)
					now = sdp_now_ns();
				if (idle == 1)
					__atomic_store_n(&e->idle_since, now, __ATOMIC_RELAXED);
				else if (idle >= SDP_ES_PARK_AFTER &&
					 now - __atomic_load_n(&e->idle_since, __ATOMIC_RELAXED) >= SDP_ES_PARK_NS)
					bad = sdp_es_park(t, j, c) != 0;
				sdp_direct_put(c);
				if (bad)
					return -1;
				continue;
			}
			sdp_direct_put(c);
			__atomic_store_n(&e->idle, 0, __ATOMIC_RELAXED);
			ev[got].events = (uint32_t)(uint16_t)rev;
			ev[got].data.u64 = e->data;
			if (++got == max)
				__atomic_store_n(&t->rot, (j + 1) % n, __ATOMIC_RELAXED);
		}
	}
	return got;
}

/* Arms every unparked entry with the set's bell (parked ones are armed
 * already: their sockets ring; a socket rings once per arm, and the core
 * registered it edge-triggered under the entry's token: the rings are
 * read only every so many arms, sdp_dconn_drain_due); -1 as sdp_es_scan,
 * or when a drain met a switch record. */
static int sdp_es_arm(struct sdpshim_eset *t)
{
	uint32_t n = __atomic_load_n(&t->n, __ATOMIC_SEQ_CST);
	for (uint32_t i = sdp_es_active(t, 0, n); i < n; i = sdp_es_active(t, i + 1, n)) {
		const struct sdpshim_eset_entry *e = &t->ent[i];
		struct sdp_dconn *c = sdp_es_conn(e);
		if (c == NULL)
			return -1;
		int bad = sdp_dconn_drain_due(c) && sdp_dconn_drain(c, e->fd) != 0;
		if (!bad)
			sdp_dconn_arm(c, sdp_es_want(e, c, t->bell), t->bell);
		sdp_direct_put(c);
		if (bad)
			return -1;
	}
	return 0;
}

/* Whether v is one of the core's tokens; one of an entry's unparks it. */
static int sdp_es_token(struct sdpshim_eset *t, uint64_t v)
{
	uint32_t lo = 0, hi = __atomic_load_n(&t->ntok, __ATOMIC_SEQ_CST);
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (t->tok[mid] == v) {
			uint32_t k = __atomic_load_n(&t->tokent[mid], __ATOMIC_SEQ_CST);
			if (k != 0 && k <= __atomic_load_n(&t->n, __ATOMIC_SEQ_CST))
				sdp_es_unpark(t, k - 1);
			return 1;
		}
		if (t->tok[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

/* Drops the tokens' events from the kernel's ev[:k], unparking their
 * entries; returns how many are left (at the front). */
static int sdp_es_filter(struct sdpshim_eset *t, struct epoll_event *ev, int k)
{
	int n = 0;
	for (int i = 0; i < k; i++)
		if (!sdp_es_token(t, ev[i].data.u64))
			ev[n++] = ev[i];
	return n;
}

/* The program's kernel fds ready now, after ev[:n] (sockets ready). */
static int sdp_es_kernel_now(int epfd, struct sdpshim_eset *t, struct epoll_event *ev, int n, int max)
{
	if (n >= max)
		return n;
	int k = sdp_real.epoll_wait(epfd, ev + n, max - n, 0);
	return k > 0 ? n + sdp_es_filter(t, ev + n, k) : n;
}

int sdp_epoll_fast_look(int epfd, struct epoll_event *ev, int max, int spin, int64_t deadline,
			const struct sdp_sigmark *mark, uint32_t *gen)
{
	struct sdpshim_eset *t = sdp_es_get(epfd);
	if (t == NULL)
		return SDPSHIM_PASS;
	*gen = __atomic_load_n(&t->gen, __ATOMIC_SEQ_CST);
	int n = sdp_es_scan(t, ev, max, 1), kernel = 0;
	if (n == 0 && spin && __atomic_load_n(&t->n, __ATOMIC_RELAXED) > 0) {
		struct sdp_dconn *lead = sdp_es_conn(&t->ent[0]);
		if (lead == NULL) {
			n = -1;
		} else {
			uint32_t budget = sdp_dconn_budget(lead), k;
			for (k = 1; k <= budget && n == 0; k++) {
				sdp_spin_step(&k);
				if ((k & 63) == 0) {
					kernel = n = sdp_es_kernel_now(epfd, t, ev, 0, max);
					if (n == 0 && sdp_poll_over(deadline, mark))
						break; /* the caller's checks end the wait */
				}
				if (n == 0)
					n = sdp_es_scan(t, ev, max, 0);
			}
			sdp_dconn_polled(lead, n > 0 ? k - 1 : 0);
			sdp_direct_put(lead);
		}
	}
	if (n == 0 && (n = sdp_es_arm(t)) == 0)
		n = sdp_es_scan(t, ev, max, 0);
	/* The kernel's ready fds after the sockets, unless ev holds them
	 * already (the spin found them first): each event once, as the
	 * kernel's epoll gives it. */
	if (n > 0 && !kernel)
		n = sdp_es_kernel_now(epfd, t, ev, n, max);
	sdp_es_put(t);
	return n < 0 ? SDPSHIM_PASS : n; /* 0: armed, for the kernel's wait */
}

int sdp_epoll_fast_after(int epfd, struct epoll_event *ev, int max, int k, int *left, uint32_t *gen)
{
	*left = k; /* stale: the core sees what the kernel returned */
	struct sdpshim_eset *t = sdp_es_get(epfd);
	if (t == NULL)
		return SDPSHIM_PASS;
	*gen = __atomic_load_n(&t->gen, __ATOMIC_SEQ_CST);
	int n = sdp_es_filter(t, ev, k), woke = n < k;
	if (n < max) {
		int s = sdp_es_scan(t, ev + n, max - n, 1);
		if (s < 0) {
			sdp_es_put(t);
			*left = 0; /* only the tokens' events were dropped */
			return n > 0 ? n : SDPSHIM_PASS;
		}
		n += s;
	}
	if (n == 0 && sdp_es_arm(t) == 0) /* woken for nothing: arms again */
		n = sdp_es_scan(t, ev, max, 0);
	if (woke && __atomic_load_n(&t->n, __ATOMIC_RELAXED) > 0) {
		struct sdp_dconn *lead = sdp_es_conn(&t->ent[0]);
		if (lead != NULL) {
			sdp_dconn_event_woke(lead);
			sdp_direct_put(lead);
		}
	}
	sdp_es_put(t);
	return n < 0 ? SDPSHIM_PASS : n;
}

struct sdpshim_eset *sdp_epoll_sleep_begin(int epfd, uint32_t gen)
{
	struct sdpshim_eset *t = sdp_es_get(epfd);
	if (t == NULL)
		return NULL;
	__atomic_fetch_add(&t->sleepers, 1, __ATOMIC_SEQ_CST);
	/* Counted as a sleeper, then look (Dekker with sdp_es_kick and
	 * sdp_epoll_update: each changes, then looks for sleepers). */
	if (__atomic_load_n(&t->stale, __ATOMIC_SEQ_CST) || __atomic_load_n(&t->gen, __ATOMIC_SEQ_CST) != gen) {
		__atomic_fetch_sub(&t->sleepers, 1, __ATOMIC_SEQ_CST);
		sdp_es_put(t);
		return NULL;
	}
	return t;
}

void sdp_epoll_sleep_end(struct sdpshim_eset *t)
{
	__atomic_fetch_sub(&t->sleepers, 1, __ATOMIC_SEQ_CST);
	sdp_es_put(t);
}
