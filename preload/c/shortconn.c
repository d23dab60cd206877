/*
 * shortconn.c - connects the interposer keeps on kernel TCP alone.
 *
 * The core's short-lived rule (shim/shortconn.go) keeps a destination's
 * connections on kernel TCP for a run once its accelerated ones there kept
 * closing right after their setup (a program that connects per request:
 * pgbench -C, a web worker to its database). Deciding each of those in the
 * core cost a runtime entry at socket(), at each socket option and flag
 * set before the connect and at the connect itself: about 0.25 ms of CPU
 * a connection in pgbench -C, most of it in the runtime threads each entry
 * woke. So the core hands the runs to the interposer (host->short_*):
 *
 *   - a TCP socket stays unseen by the core (SDP_FD_UNSEEN, shim.h) while
 *     its calls are ones the kernel answers alone;
 *   - a connect on an unseen socket to a destination with a run under way
 *     takes one connection of the run and goes to the kernel: the socket
 *     is UNMANAGED from then on, counted in fallback[] and short_plain as
 *     short-lived, fired through the fallback probe and logged at debug
 *     level, without the core ever seeing it;
 *   - any other connect adopts the socket and asks the core, which takes
 *     from the same run (short_take) for a socket it already knew.
 *
 * The runs live in a small open-addressed table keyed by a hash of the
 * destination (address and port). The core writes it, under its own lock,
 * so there is one writer at a time; connects read and decrement it from
 * any thread, without a lock (a connect may run in a signal handler).
 * A writer that gives a slot to another destination while a connect reads
 * it can cost one connection of a run: a connection accelerated or kept
 * plain once too often, never a wrong byte.
 */
#include "shim.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#define SHORT_SLOTS 256 /* a power of two */
#define SHORT_PROBES 8  /* slots looked at from a key's home */

struct short_slot {
	uint64_t key; /* the destination's hash, 0: never used */
	int32_t left; /* connections of its run still to keep plain */
	int32_t pad;
};

static struct short_slot short_tab[SHORT_SLOTS];
uint64_t sdp_short_plains;

/* The key of a destination: FNV-1a over its address (4 or 16 bytes) and
 * port (host order), never 0; 0 for an address of another length. */
static uint64_t short_key(const uint8_t *addr, uint32_t alen, uint16_t port)
{
	if (alen != 4 && alen != 16)
		return 0;
	uint64_t h = 0xcbf29ce484222325ULL;
	h = (h ^ alen) * 0x100000001b3ULL;
	for (uint32_t i = 0; i < alen; i++)
		h = (h ^ addr[i]) * 0x100000001b3ULL;
	h = (h ^ (port & 0xff)) * 0x100000001b3ULL;
	h = (h ^ (port >> 8)) * 0x100000001b3ULL;
	return h | 1;
}

/* The key of a connect's sockaddr; 0 when it is no AF_INET or AF_INET6
 * address. An IPv4-mapped IPv6 address is its IPv4 one, as the core names
 * destinations. */
static uint64_t short_key_of(const struct sockaddr *sa, socklen_t len)
{
	if (sa == NULL)
		return 0;
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		return short_key((const uint8_t *)&in->sin_addr, 4, ntohs(in->sin_port));
	}
	if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		const uint8_t *a = in6->sin6_addr.s6_addr;
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
			return short_key(a + 12, 4, ntohs(in6->sin6_port));
		return short_key(a, 16, ntohs(in6->sin6_port));
	}
	return 0;
}

/* key's slot, or NULL (always for key 0, which no slot holds). */
static struct short_slot *short_find(uint64_t key)
{
	for (uint32_t i = 0; i < SHORT_PROBES && key != 0; i++) {
		struct short_slot *s = &short_tab[(key + i) & (SHORT_SLOTS - 1)];
		if (__atomic_load_n(&s->key, __ATOMIC_ACQUIRE) == key)
			return s;
	}
	return NULL;
}

/* Takes one connection of key's run: 1 when there was one left. */
static int short_take_key(uint64_t key)
{
	struct short_slot *s = short_find(key);
	if (s == NULL)
		return 0;
	int32_t n = __atomic_load_n(&s->left, __ATOMIC_RELAXED);
	while (n > 0)
		if (__atomic_compare_exchange_n(&s->left, &n, n - 1, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			return 1;
	return 0;
}

/* Puts back one connection taken from key's run. */
static void short_give_back(uint64_t key)
{
	struct short_slot *s = short_find(key);
	if (s != NULL)
		__atomic_fetch_add(&s->left, 1, __ATOMIC_RELAXED);
}

int sdp_short_run(const uint8_t *addr, uint32_t alen, uint16_t port, int32_t n)
{
	uint64_t key = short_key(addr, alen, port);
	if (key == 0)
		return 0;
	struct short_slot *s = short_find(key);
	if (s == NULL) {
		if (n <= 0)
			return 1; /* nothing to end */
		/* A slot whose run is over (or never began) is free. */
		for (uint32_t i = 0; i < SHORT_PROBES && s == NULL; i++) {
			struct short_slot *c = &short_tab[(key + i) & (SHORT_SLOTS - 1)];
			if (__atomic_load_n(&c->left, __ATOMIC_RELAXED) <= 0)
				s = c;
		}
		if (s == NULL)
			return 0;
		__atomic_store_n(&s->left, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&s->key, key, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&s->left, n > 0 ? n : 0, __ATOMIC_RELEASE);
	return 1;
}

int sdp_short_left(const uint8_t *addr, uint32_t alen, uint16_t port)
{
	struct short_slot *s = short_find(short_key(addr, alen, port));
	return s == NULL ? 0 : __atomic_load_n(&s->left, __ATOMIC_RELAXED);
}

int sdp_short_take(const uint8_t *addr, uint32_t alen, uint16_t port)
{
	return short_take_key(short_key(addr, alen, port));
}

int sdp_short_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	uint64_t key = short_key_of(addr, len);
	if (key == 0 || !short_take_key(key))
		return 0;
	int saved = errno;
	if (!sdp_fd_cas(fd, SDP_FD_UNSEEN, SDPSHIM_FD_UNMANAGED)) {
		/* Another thread adopts it meanwhile: the core decides, and the
		 * connection taken stays in the run. */
		short_give_back(key);
		errno = saved;
		return 0;
	}
	__atomic_fetch_add(&sdp_short_plains, 1, __ATOMIC_RELAXED);
	sdp_fallback_note(SDPSHIM_REASON_SHORT_LIVED, fd);
	sdp_log(SDP_LOG_DEBUG, "connection stays on kernel TCP: fd %d, reason=short-lived (a plain run)", fd);
	errno = saved;
	return 1;
}

void sdp_short_forget(void)
{
	memset(short_tab, 0, sizeof short_tab);
	__atomic_store_n(&sdp_short_plains, 0, __ATOMIC_RELAXED);
}
