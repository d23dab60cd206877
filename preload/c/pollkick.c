/*
 * pollkick.c - how the core wakes the threads asleep in poll, ppoll,
 * select or pselect over managed sockets, for what only this process
 * knows: a shutdown by another thread, a switch to kernel TCP, a
 * connection's verdict, a mux stream's event (host->poll_kick). The peer's
 * events come on the sockets themselves (a direct connection's ring is a
 * byte on its TCP socket: direct.h), or on the thread's eventfd when it
 * is a bell (below), so no socket needs an fd of its own.
 *
 * Each thread that sleeps in the poll engine with managed entries has one
 * eventfd (its slot's, made at the slot's first use, PROTECTED, among the
 * shim's high numbers) in its ppoll set, and a slot that
 * says whether it is in the engine. A kick writes the eventfd of every
 * thread in the engine: rare events, never one per message. The thread
 * marks itself in before its first readiness check and reads its eventfd
 * only after a sleep it ended, so a kick after that check finds the
 * eventfd's count and ends the sleep at once (no Dekker needed: the
 * eventfd keeps the kick).
 *
 * The first SDP_DBELLS_POLL slots' eventfds are also bells (direct.h):
 * the core gives them to peer processes in the rendezvous (host
 * poll_bells), and a thread in one of those slots arms its direct
 * connections with the slot's number, so the peer wakes it with an
 * eventfd write instead of a byte on the socket. A peer keeps its copy
 * for good, so a slot's eventfd outlives the thread: a thread's exit
 * frees the slot and keeps the eventfd open for the next thread that
 * takes it (a kick left in it ends that thread's first sleep early: it
 * looks again).
 */
#include "shim.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SDP_PK_MAX 4096 /* threads with an eventfd at once; more sleep in slices */

enum { PK_FREE = 0, PK_OWNED = 1, PK_IN = 2 };

struct sdp_pk {
	int32_t fd1; /* the slot's eventfd + 1; 0: none made yet */
	uint32_t state;
};

static struct sdp_pk sdp_pk[SDP_PK_MAX];
static uint32_t sdp_pk_hi; /* slots below it may be in use */
static __thread int sdp_pk_mine = -1;
static pthread_key_t sdp_pk_key;
static pthread_once_t sdp_pk_once = PTHREAD_ONCE_INIT;
static int sdp_pk_keyed;

/* Slot i's eventfd, or -1. */
static inline int sdp_pk_fd(int i) { return __atomic_load_n(&sdp_pk[i].fd1, __ATOMIC_ACQUIRE) - 1; }

/* The thread's exit: its slot goes, its eventfd stays with the slot. */
static void sdp_pk_exit(void *v)
{
	int i = (int)(intptr_t)v - 1;
	if (i >= 0 && i < SDP_PK_MAX)
		__atomic_store_n(&sdp_pk[i].state, PK_FREE, __ATOMIC_RELEASE);
}

static void sdp_pk_setup(void) { sdp_pk_keyed = pthread_key_create(&sdp_pk_key, sdp_pk_exit) == 0; }

/* A new kick eventfd among the shim's high numbers, PROTECTED; -1 when
 * none can be made. */
static int sdp_pk_eventfd(void)
{
	int efd = (int)syscall(SYS_eventfd2, 0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (efd < 0)
		return -1;
	int hi = sdp_real.fcntl(efd, F_DUPFD_CLOEXEC, sdp_core_high_fd());
	if (hi >= 0) {
		syscall(SYS_close, efd);
		efd = hi;
	}
	sdp_fd_set(efd, SDPSHIM_FD_PROTECTED);
	return efd;
}

/* The calling thread's slot, taken on first use (a free one, with the
 * eventfd it keeps, or a new one); -1 when none can be. */
static int sdp_pk_slot(void)
{
	if (sdp_pk_mine >= 0)
		return sdp_pk_mine;
	pthread_once(&sdp_pk_once, sdp_pk_setup);
	if (!sdp_pk_keyed)
		return -1;
	for (int i = 0; i < SDP_PK_MAX; i++) {
		uint32_t f = PK_FREE;
		if (!__atomic_compare_exchange_n(&sdp_pk[i].state, &f, PK_OWNED, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			continue;
		int efd = sdp_pk_fd(i);
		if (efd >= 0) {
			uint64_t v;
			syscall(SYS_read, efd, &v, sizeof v); /* a kick meant for the thread before */
		} else if ((efd = sdp_pk_eventfd()) < 0) {
			__atomic_store_n(&sdp_pk[i].state, PK_FREE, __ATOMIC_RELEASE);
			return -1;
		} else {
			__atomic_store_n(&sdp_pk[i].fd1, efd + 1, __ATOMIC_RELEASE);
		}
		uint32_t top = __atomic_load_n(&sdp_pk_hi, __ATOMIC_RELAXED);
		while (top < (uint32_t)i + 1 &&
		       !__atomic_compare_exchange_n(&sdp_pk_hi, &top, (uint32_t)i + 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
		pthread_setspecific(sdp_pk_key, (void *)(intptr_t)(i + 1));
		sdp_pk_mine = i;
		return i;
	}
	return -1;
}

uint32_t sdp_pollkick_bell(void)
{
	int i = sdp_pk_slot();
	return i >= 0 && i < SDP_DBELLS_POLL ? SDP_DBELL_POLL + (uint32_t)i : 0;
}

int sdp_pollkick_bells(int *fds, int max)
{
	int n = 0;
	for (; n < max && n < SDP_DBELLS_POLL; n++)
		fds[n] = sdp_pk_fd(n);
	return n;
}

int sdp_pollkick_begin(void)
{
	int i = sdp_pk_slot();
	if (i < 0)
		return -1;
	__atomic_store_n(&sdp_pk[i].state, PK_IN, __ATOMIC_SEQ_CST);
	return sdp_pk_fd(i);
}

void sdp_pollkick_woke(void)
{
	int i = sdp_pk_mine;
	if (i >= 0) {
		uint64_t v;
		syscall(SYS_read, sdp_pk_fd(i), &v, sizeof v);
	}
}

void sdp_pollkick_end(void)
{
	int i = sdp_pk_mine;
	if (i >= 0)
		__atomic_store_n(&sdp_pk[i].state, PK_OWNED, __ATOMIC_RELEASE);
}

void sdp_pollkick_all(void)
{
	uint32_t hi = __atomic_load_n(&sdp_pk_hi, __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < hi; i++)
		if (__atomic_load_n(&sdp_pk[i].state, __ATOMIC_SEQ_CST) == PK_IN) {
			int fd = sdp_pk_fd((int)i);
			uint64_t one = 1;
			if (fd >= 0)
				syscall(SYS_write, fd, &one, sizeof one); /* EAGAIN at the limit: readable already */
		}
}

void sdp_pollkick_forget_all(void)
{
	uint32_t hi = __atomic_load_n(&sdp_pk_hi, __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < hi; i++) {
		int fd = sdp_pk_fd((int)i);
		if (fd >= 0) {
			sdp_fd_set(fd, SDPSHIM_FD_UNMANAGED);
			syscall(SYS_close, fd);
		}
		sdp_pk[i].fd1 = 0;
		sdp_pk[i].state = PK_FREE;
	}
	sdp_pk_hi = 0;
	sdp_pk_mine = -1;
	if (sdp_pk_keyed)
		pthread_setspecific(sdp_pk_key, NULL);
}
