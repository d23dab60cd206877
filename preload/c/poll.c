/*
 * poll.c - poll, ppoll, __poll_chk, __ppoll_chk, select, pselect.
 *
 * When no fd of the process is MANAGED or PROTECTED (sdp_fd_special == 0),
 * these go straight to the kernel without looking at the set; otherwise the
 * set is scanned and still goes straight to the kernel when none of its fds
 * is. CANDIDATE fds are kernel fds here (see sdpshim_core.h), once a
 * process that may hold deferred connections has had the core claim them
 * (sdp_claim: a deferred connection's first use may be a poll).
 *
 * A set with MANAGED fds runs sdp_poll_engine(): the core reports the
 * MANAGED entries' readiness and the fds to sleep on (doorbells), the
 * kernel ppoll()s the other entries plus those, with the caller's timeout
 * and signal mask; a wake-up that readied nothing the caller asked for goes
 * round again with the time left. When every MANAGED entry is a direct
 * connection in its plain state (sdp_direct_poll_get), the engine answers
 * for them itself, without entering the core: their readiness from the
 * shared area, the adaptive poll budget, then an armed sleep on their
 * eventfds, which the peer's thread writes (direct.h). PROTECTED fds read
 * POLLNVAL (poll) or fail the call with EBADF (select), as fds that are not
 * open do.
 */
#include "direct.h"
#include "shim.h"
#include "sigcount.h"

#include <sched.h>
#include <sys/syscall.h>

#include <string.h>
#include <sys/mman.h>

/* glibc 2.36 declares poll's and ppoll's fds write_only (it is read and
 * written; fixed in later glibc): do not warn about reading it. */
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

/* Scratch for the kernel set: on the stack up to this many entries, else
 * mmap (poll is async-signal-safe: no malloc). */
#define SDP_POLL_STACK 128

struct sdp_scratch {
	void *mem;
	size_t len;
};

static void *sdp_scratch_get(struct sdp_scratch *s, void *stack, size_t stack_len, size_t len)
{
	s->mem = NULL;
	s->len = 0;
	if (len <= stack_len)
		return stack;
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	s->mem = m;
	s->len = len;
	return m;
}

static void sdp_scratch_put(struct sdp_scratch *s)
{
	if (s->mem != NULL)
		munmap(s->mem, s->len);
}

static int sdp_ts_valid(const struct timespec *t)
{
	return t == NULL || (t->tv_sec >= 0 && t->tv_nsec >= 0 && t->tv_nsec < 1000000000L);
}

static struct timespec sdp_ts_left(int64_t deadline, int64_t now)
{
	int64_t left = deadline > now ? deadline - now : 0;
	struct timespec ts = {left / 1000000000LL, left % 1000000000LL};
	return ts;
}

/* fd's state for the engine: MANAGED, with *inh set, for an inherited fd
 * that a fork child goes on with over its parent's area (forkkeep.c),
 * whose readiness is the area's as for any direct socket here. */
static int sdp_poll_state(int fd, int *inh)
{
	*inh = sdp_fd_continues(fd);
	return *inh ? SDPSHIM_FD_MANAGED : sdp_fd_state_look(fd);
}

/* What a poll set holds: MANAGED fds (with the core running, or
 * inherited) and PROTECTED. */
static void sdp_poll_census(const struct pollfd *fds, nfds_t n, nfds_t *managed, nfds_t *protected)
{
	int ready = sdp_core_ready();
	*managed = *protected = 0;
	for (nfds_t i = 0; i < n; i++) {
		int inh, s = sdp_poll_state(fds[i].fd, &inh);
		if (s == SDPSHIM_FD_PROTECTED)
			(*protected)++;
		else if (s == SDPSHIM_FD_MANAGED && (ready || inh))
			(*managed)++;
	}
}

/* poll over fds with MANAGED or PROTECTED entries. timeout: NULL waits
 * forever. Returns the poll result, -1 with errno on failure.
 *
 * As in epoll's engine (epoll.c), the program's signals are held
 * (sdp_signals_hold) only from the first pass that finds nothing ready
 * until the engine returns, so that they interrupt the kernel sleep
 * exactly as the kernel would: a call whose first look finds something
 * makes no sigprocmask call. A handler that ran during that first look is
 * seen in the trampoline's count (sigcount.h): poll fails with EINTR
 * after any handler, SA_RESTART or not (signal(7)). */
/* A thread without a kick eventfd (pollkick.c) sleeps at most this long
 * at a time. */
#define SDP_POLL_SLICE_NS 10000000L

/* The events a direct connection's sleep arms for (direct.h). */
static int sdp_direct_arm_events(short events)
{
	return ((events & (POLLIN | POLLRDNORM)) ? POLLIN : 0) |
	       ((events & (POLLOUT | POLLWRNORM | POLLWRBAND)) ? POLLOUT : 0);
}

/* Sets the revents of the entries with a direct handle (h[i] != NULL);
 * returns how many are ready. */
static int sdp_direct_scan(struct pollfd *fds, struct sdp_dconn **h, nfds_t n)
{
	int ready = 0;
	for (nfds_t i = 0; i < n; i++)
		if (h[i] != NULL && (fds[i].revents = (short)sdp_dconn_revents(h[i], fds[i].events)) != 0)
			ready++;
	return ready;
}

static void sdp_direct_release(struct sdp_dconn **h, nfds_t n)
{
	for (nfds_t i = 0; i < n; i++)
		if (h[i] != NULL) {
			sdp_direct_put(h[i]);
			h[i] = NULL;
		}
}

/* The direct entries of a set the engine answers for alone: readiness,
 * then (first round only) the budget's polling, then the arming and a last
 * look. Returns how many are ready; with none, appends their sockets to
 * wait (*nwait of cap: the peer's ring is a byte on it, the peer's end
 * its end, a switch's request its urgent byte) and records in at[] which
 * entry each is; -1 when the set is the core's to answer after all (a
 * drain met a switch record). lead keeps the budget, which ends early
 * once a kernel fd of the set (kfds[:nk]) is ready, the deadline
 * (sdp_now_ns; 0: none) passed or a handler ran since mark. woke[i]: the last
 * sleep was ended by entry i's socket, whose rings are read here (the
 * kernel's poll reports them until then); *kicked: by the thread's
 * eventfd (a peer's bell, or the core's kick). */
static int sdp_direct_round(struct pollfd *fds, struct sdp_dconn **h, nfds_t n, struct sdp_dconn *lead, int *polled,
			    unsigned char *woke, int *kicked, struct pollfd *kfds, nfds_t nk, int64_t deadline,
			    const struct sdp_sigmark *mark, struct pollfd *wait, unsigned int *at, nfds_t cap,
			    nfds_t *nwait)
{
	int any = *kicked;
	*kicked = 0;
	for (nfds_t i = 0; i < n; i++)
		if (woke[i]) {
			woke[i] = 0;
			if (h[i] != NULL) {
				if (sdp_dconn_drain(h[i], fds[i].fd) != 0)
					return -1;
				any = 1;
			}
		}
	if (any)
		sdp_dconn_event_woke(lead);
	int ready = sdp_direct_scan(fds, h, n);
	if (ready == 0 && !*polled) {
		*polled = 1;
		uint32_t budget = sdp_dconn_budget(lead), k;
		for (k = 1; k <= budget && ready == 0; k++) {
			sdp_spin_step(&k);
			ready = sdp_direct_scan(fds, h, n);
			/* Every so often the set's kernel fds, the program's
			 * timeout and its signals: the kernel's wait that follows
			 * reports them (a handler that ran: EINTR, as there). */
			if (ready == 0 && (k & 63) == 0 &&
			    ((nk > 0 && sdp_real.poll(kfds, nk, 0) > 0) || sdp_poll_over(deadline, mark)))
				break;
		}
		sdp_dconn_polled(lead, ready > 0 ? k - 1 : 0);
	}
	if (ready > 0)
		return ready;
	uint32_t bell = sdp_pollkick_bell();
	for (nfds_t i = 0; i < n; i++)
		if (h[i] != NULL)
			sdp_dconn_arm(h[i], sdp_direct_arm_events(fds[i].events), bell);
	if ((ready = sdp_direct_scan(fds, h, n)) > 0)
		return ready;
	for (nfds_t i = 0; i < n && *nwait < cap; i++)
		if (h[i] != NULL) {
			at[*nwait] = (unsigned int)i;
			wait[(*nwait)++] = (struct pollfd){.fd = fds[i].fd, .events = POLLIN | POLLPRI | POLLRDHUP};
		}
	return 0;
}

static int sdp_poll_engine(struct pollfd *fds, nfds_t n, nfds_t managed, const struct timespec *timeout,
			   const sigset_t *sigmask)
{
	if (!sdp_ts_valid(timeout))
		return (int)sdp_fail(EINVAL);
	struct sdp_sigmark mark;
	sdp_sig_mark(&mark);
	sigset_t old;
	int held = 0;
	int zero = timeout != NULL && timeout->tv_sec == 0 && timeout->tv_nsec == 0;
	int64_t deadline = timeout ? sdp_now_ns() + (int64_t)timeout->tv_sec * 1000000000LL + timeout->tv_nsec : 0;
	nfds_t wcap = 2 * managed + 1; /* the waits' fds; the kick eventfd goes after them */
	struct pollfd kstack[SDP_POLL_STACK];
	unsigned int istack[SDP_POLL_STACK];
	/* The direct entries (poll.c's own answers): their handles, which
	 * socket of the sleep is whose, and which ended the last sleep. */
	struct sdp_dconn *hstack[SDP_POLL_STACK];
	unsigned int astack[SDP_POLL_STACK];
	unsigned char wstack[SDP_POLL_STACK];
	struct sdp_scratch ks, is, hs, as, ws;
	struct pollfd *k = sdp_scratch_get(&ks, kstack, sizeof kstack, (n + wcap + 1) * sizeof(struct pollfd));
	unsigned int *idx = sdp_scratch_get(&is, istack, sizeof istack, n * sizeof(unsigned int));
	struct sdp_dconn **h = sdp_scratch_get(&hs, hstack, sizeof hstack, n * sizeof(struct sdp_dconn *));
	unsigned int *at = sdp_scratch_get(&as, astack, sizeof astack, n * sizeof(unsigned int));
	unsigned char *woke = sdp_scratch_get(&ws, wstack, sizeof wstack, n);
	/* polled: no poll budget for a wait with a signal mask of its own (a
	 * signal it unblocks must end it; only the kernel's wait applies it). */
	int result, polled = sigmask != NULL, kicked = 0;
	/* The core's wakes for what only this process knows (pollkick.c);
	 * without an eventfd the sleep goes in slices. */
	int kick = sdp_pollkick_begin();
	if (k == NULL || idx == NULL || h == NULL || at == NULL || woke == NULL) {
		result = (int)sdp_fail(ENOMEM);
		goto out;
	}
	memset(woke, 0, n);
	for (;;) {
		int ready = 0, managed_here = 0, direct_wait = 0;
		nfds_t u = 0, nwait = 0;
		struct sdp_dconn *lead = NULL;
		for (nfds_t i = 0; i < n; i++) {
			fds[i].revents = 0;
			h[i] = NULL;
			if (fds[i].fd < 0)
				continue;
			int inh, s = sdp_poll_state(fds[i].fd, &inh);
			if (s == SDPSHIM_FD_MANAGED && inh && (h[i] = sdp_direct_poll_get(fds[i].fd)) == NULL) {
				/* A fork child's inherited fd that the area no
				 * longer answers for: switched, then plain. */
				sdp_fork_kept_resolve(fds[i].fd);
				s = SDPSHIM_FD_UNMANAGED;
			}
			if (s == SDPSHIM_FD_PROTECTED) {
				fds[i].revents = POLLNVAL;
				ready++;
			} else if (s == SDPSHIM_FD_MANAGED && inh) {
				if (lead == NULL)
					lead = h[i];
			} else if (s == SDPSHIM_FD_MANAGED && sdp_core_ready()) {
				if ((h[i] = sdp_direct_poll_get(fds[i].fd)) == NULL)
					managed_here = 1;
				else if (lead == NULL)
					lead = h[i];
			} else {
				k[u] = (struct pollfd){.fd = fds[i].fd, .events = fds[i].events};
				idx[u++] = (unsigned int)i;
			}
		}
		if (managed_here)
			sdp_direct_release(h, n); /* the core answers for every MANAGED entry */
		if (!managed_here && lead != NULL) {
			int r = sdp_direct_round(fds, h, n, lead, &polled, woke, &kicked, k, u, timeout ? deadline : 0, &mark,
						 k + u, at, wcap, &nwait);
			sdp_direct_release(h, n);
			if (r < 0 && !sdp_core_ready()) {
				/* A fork child going on over inherited areas: the
				 * switch resolves them, and the set is looked at again. */
				sdp_fork_kept_resolve(-1);
				memset(woke, 0, n);
				continue;
			} else if (r < 0) {
				managed_here = 1; /* a switch begins: the core answers */
				memset(woke, 0, n);
				nwait = 0;
			} else {
				ready += r;
				direct_wait = 1;
			}
		}
		if (managed_here) {
			/* The core polls for the budget at most for the time left,
			 * and not at all for a wait with a signal mask of its own. */
			int64_t left = polled ? 0 : timeout ? deadline - sdp_now_ns() : -1;
			if (timeout && left < 0)
				left = 0; /* passed: no polling (-1 would be none to end it) */
			int r = SDP_CORE_CALL(sdp_core.poll(fds, n, k + u, wcap, &nwait, left));
			if (r == SDPSHIM_PASS) { /* the whole set, in the kernel */
				for (nfds_t i = 0; i < n; i++)
					if (fds[i].fd >= 0 && sdp_fd_state_look(fds[i].fd) == SDPSHIM_FD_MANAGED) {
						k[u] = (struct pollfd){.fd = fds[i].fd, .events = fds[i].events};
						idx[u++] = (unsigned int)i;
					}
				nwait = 0;
			} else if (r < 0) {
				result = (int)sdp_result(r, 0);
				goto out;
			} else {
				ready += r;
				if (nwait > wcap)
					nwait = wcap;
			}
		}
		if (ready == 0 && !held) {
			sdp_signals_hold(&old);
			held = 1;
			if (sigmask == NULL)
				sigmask = &old;
			if (!zero && sdp_sig_since(&mark) != SDP_SIG_NONE) {
				/* A handler ran during the first look: the
				 * kernel's sleep would have ended with EINTR. */
				result = (int)sdp_fail(EINTR);
				goto out;
			}
		}
		int64_t now = ready > 0 || timeout == NULL ? 0 : sdp_now_ns();
		struct timespec left = ready > 0 ? (struct timespec){0, 0} : sdp_ts_left(deadline, now);
		int sliced = 0;
		nfds_t nk = u + nwait;
		if (kick >= 0)
			k[nk++] = (struct pollfd){.fd = kick, .events = POLLIN};
		else if (ready == 0 && (timeout == NULL || left.tv_sec > 0 || left.tv_nsec > SDP_POLL_SLICE_NS)) {
			left = (struct timespec){0, SDP_POLL_SLICE_NS};
			sliced = 1;
		}
		int kr = sdp_real.ppoll(k, nk, ready > 0 || timeout || sliced ? &left : NULL, sigmask);
		if (kr > 0 && kick >= 0 && k[nk - 1].revents != 0) {
			sdp_pollkick_woke();
			kicked = 1;
			kr--;
		}
		if (kr < 0 && ready == 0) {
			result = -1;
			goto out;
		}
		for (nfds_t j = 0; kr > 0 && j < u; j++)
			if (k[j].revents != 0) {
				fds[idx[j]].revents = k[j].revents;
				ready++;
			}
		for (nfds_t j = u; kr > 0 && direct_wait && j < u + nwait; j++)
			if (k[j].revents != 0)
				woke[at[j - u]] = 1; /* emptied at the next round */
		if (ready > 0 || (timeout != NULL && sdp_now_ns() >= deadline)) {
			result = ready;
			goto out;
		}
	}
out:
	sdp_pollkick_end();
	sdp_scratch_put(&ks);
	sdp_scratch_put(&is);
	sdp_scratch_put(&hs);
	sdp_scratch_put(&as);
	sdp_scratch_put(&ws);
	if (held) {
		int err = errno;
		sdp_signals_release(&old);
		errno = err;
	}
	return result;
}

/* The state of deferred fd once the core has seen it used by a poll or
 * select (the claim hook): it is claimed as at its first data call, and
 * may come back MANAGED, or UNMANAGED. */
static SDP_COLD int sdp_claim(int fd)
{
	if (!sdp_core_want())
		return SDPSHIM_FD_CANDIDATE;
	SDP_CORE_DO((void)sdp_core.claim(fd)); /* the core sets the state it returns */
	return sdp_fd_state(fd);
}

static inline int sdp_claiming(void) { return unlikely(__atomic_load_n(&sdp_deferred_hint, __ATOMIC_RELAXED) != 0); }

/* 1 when the set needs the engine (and how many MANAGED it holds). */
static int sdp_poll_needs_engine(const struct pollfd *fds, nfds_t n, nfds_t *managed)
{
	int claiming = sdp_claiming();
	if ((likely(!sdp_fd_any_special()) && !claiming) || sdp_passthrough())
		return 0;
	if (claiming)
		for (nfds_t i = 0; i < n; i++)
			if (sdp_fd_state_raw(fds[i].fd) == SDP_FD_DEFERRED)
				sdp_claim(fds[i].fd);
	nfds_t protected;
	sdp_poll_census(fds, n, managed, &protected);
	return *managed + protected > 0;
}

static SDP_COLD int poll_slow(struct pollfd *fds, nfds_t n, int timeout_ms, nfds_t managed)
{
	struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000};
	return sdp_poll_engine(fds, n, managed, timeout_ms < 0 ? NULL : &ts, NULL);
}

SDP_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	nfds_t managed;
	if (likely(!sdp_poll_needs_engine(fds, n, &managed)))
		return sdp_real.poll(fds, n, timeout);
	return poll_slow(fds, n, timeout, managed);
}

SDP_EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	nfds_t managed;
	if (likely(!sdp_poll_needs_engine(fds, n, &managed)) || fdslen / sizeof(*fds) < n)
		return sdp_real.__poll_chk(fds, n, timeout, fdslen);
	return poll_slow(fds, n, timeout, managed);
}

SDP_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *t, const sigset_t *mask)
{
	nfds_t managed;
	if (likely(!sdp_poll_needs_engine(fds, n, &managed)))
		return sdp_real.ppoll(fds, n, t, mask);
	return sdp_poll_engine(fds, n, managed, t, mask);
}

SDP_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *t, const sigset_t *mask,
			   size_t fdslen)
{
	nfds_t managed;
	if (likely(!sdp_poll_needs_engine(fds, n, &managed)) || fdslen / sizeof(*fds) < n)
		return sdp_real.__ppoll_chk(fds, n, t, mask, fdslen);
	return sdp_poll_engine(fds, n, managed, t, mask);
}

/* ---- select ------------------------------------------------------------------------------- */

/* The kernel's select <-> poll event sets (fs/select.c). */
#define SDP_POLLIN_SET (POLLRDNORM | POLLRDBAND | POLLIN | POLLHUP | POLLERR)
#define SDP_POLLOUT_SET (POLLWRBAND | POLLWRNORM | POLLOUT | POLLERR)
#define SDP_POLLEX_SET (POLLPRI)

#define SDP_WORD_BITS (8 * sizeof(unsigned long))

static int sdp_bit(const fd_set *s, int fd)
{
	return s != NULL && ((const unsigned long *)s)[fd / SDP_WORD_BITS] >> (fd % SDP_WORD_BITS) & 1;
}

static void sdp_bit_set(fd_set *s, int fd) { ((unsigned long *)s)[fd / SDP_WORD_BITS] |= 1UL << (fd % SDP_WORD_BITS); }

/* 1 when one of the fds in the sets (below nfds) is MANAGED or PROTECTED. */
static int sdp_select_needs_engine(int nfds, const fd_set *r, const fd_set *w, const fd_set *e)
{
	int claiming = sdp_claiming();
	if ((likely(!sdp_fd_any_special()) && !claiming) || sdp_passthrough() || nfds <= 0)
		return 0;
	int found = 0;
	for (int base = 0; base < nfds; base += SDP_WORD_BITS) {
		unsigned long word = 0;
		if (r)
			word |= ((const unsigned long *)r)[base / SDP_WORD_BITS];
		if (w)
			word |= ((const unsigned long *)w)[base / SDP_WORD_BITS];
		if (e)
			word |= ((const unsigned long *)e)[base / SDP_WORD_BITS];
		while (word) {
			int fd = base + __builtin_ctzl(word);
			word &= word - 1;
			if (fd >= nfds)
				break;
			int inh, s = sdp_poll_state(fd, &inh);
			if (claiming && sdp_fd_state_raw(fd) == SDP_FD_DEFERRED)
				s = sdp_claim(fd);
			if (s == SDPSHIM_FD_PROTECTED || (s == SDPSHIM_FD_MANAGED && (inh || sdp_core_ready())))
				found = 1; /* claiming goes on through the set */
			if (found && !claiming)
				return 1;
		}
	}
	return found;
}

/* select through the poll engine; the sets change only on success. */
static SDP_COLD int select_slow(int nfds, fd_set *r, fd_set *w, fd_set *e, const struct timespec *timeout,
				const sigset_t *mask)
{
	size_t cap = 0;
	for (int fd = 0; fd < nfds; fd++)
		cap += sdp_bit(r, fd) | sdp_bit(w, fd) | sdp_bit(e, fd);
	struct pollfd pstack[SDP_POLL_STACK];
	struct sdp_scratch ps;
	struct pollfd *p = sdp_scratch_get(&ps, pstack, sizeof pstack, (cap ? cap : 1) * sizeof(struct pollfd));
	if (p == NULL)
		return (int)sdp_fail(ENOMEM);
	nfds_t n = 0, managed = 0;
	for (int fd = 0; fd < nfds; fd++) {
		short ev = (short)((sdp_bit(r, fd) ? POLLIN | POLLRDNORM | POLLRDBAND : 0) |
				   (sdp_bit(w, fd) ? POLLOUT | POLLWRNORM | POLLWRBAND : 0) |
				   (sdp_bit(e, fd) ? POLLPRI : 0));
		if (ev == 0)
			continue;
		p[n++] = (struct pollfd){.fd = fd, .events = ev};
		int inh;
		managed += sdp_poll_state(fd, &inh) == SDPSHIM_FD_MANAGED;
	}
	int rc = sdp_poll_engine(p, n, managed, timeout, mask);
	if (rc >= 0) {
		for (nfds_t i = 0; i < n; i++)
			if (p[i].revents & POLLNVAL) {
				rc = (int)sdp_fail(EBADF);
				goto out;
			}
		size_t words = ((size_t)nfds + SDP_WORD_BITS - 1) / SDP_WORD_BITS;
		if (r)
			memset(r, 0, words * sizeof(unsigned long));
		if (w)
			memset(w, 0, words * sizeof(unsigned long));
		if (e)
			memset(e, 0, words * sizeof(unsigned long));
		rc = 0;
		for (nfds_t i = 0; i < n; i++) {
			int fd = p[i].fd;
			short re = p[i].revents, ev = p[i].events;
			if ((re & SDP_POLLIN_SET) && (ev & POLLIN)) {
				sdp_bit_set(r, fd);
				rc++;
			}
			if ((re & SDP_POLLOUT_SET) && (ev & POLLOUT)) {
				sdp_bit_set(w, fd);
				rc++;
			}
			if ((re & SDP_POLLEX_SET) && (ev & POLLPRI)) {
				sdp_bit_set(e, fd);
				rc++;
			}
		}
	}
out:
	sdp_scratch_put(&ps);
	return rc;
}

SDP_EXPORT int select(int nfds, fd_set *restrict r, fd_set *restrict w, fd_set *restrict e,
		      struct timeval *restrict tv)
{
	if (likely(!sdp_select_needs_engine(nfds, r, w, e)))
		return sdp_real.select(nfds, r, w, e, tv);
	if (tv != NULL && (tv->tv_sec < 0 || tv->tv_usec < 0 || tv->tv_usec >= 1000000))
		return (int)sdp_fail(EINVAL);
	struct timespec ts, *tp = NULL;
	int64_t deadline = 0;
	if (tv != NULL) {
		ts = (struct timespec){tv->tv_sec, tv->tv_usec * 1000};
		tp = &ts;
		deadline = sdp_now_ns() + (int64_t)tv->tv_sec * 1000000000LL + tv->tv_usec * 1000LL;
	}
	int rc = select_slow(nfds, r, w, e, tp, NULL);
	if (tv != NULL) { /* Linux reports the time not slept */
		int saved = errno;
		struct timespec left = sdp_ts_left(deadline, sdp_now_ns());
		tv->tv_sec = left.tv_sec;
		tv->tv_usec = left.tv_nsec / 1000;
		errno = saved;
	}
	return rc;
}

SDP_EXPORT int pselect(int nfds, fd_set *restrict r, fd_set *restrict w, fd_set *restrict e,
		       const struct timespec *restrict t, const sigset_t *restrict mask)
{
	if (likely(!sdp_select_needs_engine(nfds, r, w, e)))
		return sdp_real.pselect(nfds, r, w, e, t, mask);
	return select_slow(nfds, r, w, e, t, mask);
}
