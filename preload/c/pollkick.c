/*
 * pollkick.c - how the core wakes the threads asleep in poll, ppoll,
 * select or pselect over managed sockets, for what only this process
 * knows: a shutdown by another thread, a switch to kernel TCP, a
 * connection's verdict, a mux stream's event (host->poll_kick). The peer's
 * events come on the sockets themselves (a direct connection's ring is a
 * byte on its TCP socket: direct.h), so no socket needs an fd of its own.
 *
 * Each thread that sleeps in the poll engine with managed entries has one
 * eventfd (made at its first such sleep, PROTECTED, among the shim's high
 * numbers, closed when the thread exits) in its ppoll set, and a slot that
 * says whether it is in the engine. A kick writes the eventfd of every
 * thread in the engine: rare events, never one per message. The thread
 * marks itself in before its first readiness check and reads its eventfd
 * only after a sleep it ended, so a kick after that check finds the
 * eventfd's count and ends the sleep at once (no Dekker needed: the
 * eventfd keeps the kick).
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
	int32_t fd;
	uint32_t state;
};

static struct sdp_pk sdp_pk[SDP_PK_MAX];
static uint32_t sdp_pk_hi; /* slots below it may be in use */
static __thread int sdp_pk_mine = -1;
static pthread_key_t sdp_pk_key;
static pthread_once_t sdp_pk_once = PTHREAD_ONCE_INIT;
static int sdp_pk_keyed;

/* The thread's exit: its slot and eventfd go. */
static void sdp_pk_exit(void *v)
{
	int i = (int)(intptr_t)v - 1;
	if (i < 0 || i >= SDP_PK_MAX)
		return;
	int fd = __atomic_exchange_n(&sdp_pk[i].fd, -1, __ATOMIC_SEQ_CST);
	if (fd >= 0) {
		sdp_fd_set(fd, SDPSHIM_FD_UNMANAGED);
		syscall(SYS_close, fd);
	}
	__atomic_store_n(&sdp_pk[i].state, PK_FREE, __ATOMIC_RELEASE);
}

static void sdp_pk_setup(void) { sdp_pk_keyed = pthread_key_create(&sdp_pk_key, sdp_pk_exit) == 0; }

/* The calling thread's slot, made on first use; -1 when none can be. */
static int sdp_pk_slot(void)
{
	if (sdp_pk_mine >= 0)
		return sdp_pk_mine;
	pthread_once(&sdp_pk_once, sdp_pk_setup);
	if (!sdp_pk_keyed)
		return -1;
	int efd = (int)syscall(SYS_eventfd2, 0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (efd < 0)
		return -1;
	int hi = sdp_real.fcntl(efd, F_DUPFD_CLOEXEC, sdp_core_high_fd());
	if (hi >= 0) {
		syscall(SYS_close, efd);
		efd = hi;
	}
	for (int i = 0; i < SDP_PK_MAX; i++) {
		uint32_t f = PK_FREE;
		if (__atomic_compare_exchange_n(&sdp_pk[i].state, &f, PK_OWNED, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			sdp_fd_set(efd, SDPSHIM_FD_PROTECTED);
			__atomic_store_n(&sdp_pk[i].fd, efd, __ATOMIC_RELEASE);
			uint32_t top = __atomic_load_n(&sdp_pk_hi, __ATOMIC_RELAXED);
			while (top < (uint32_t)i + 1 &&
			       !__atomic_compare_exchange_n(&sdp_pk_hi, &top, (uint32_t)i + 1, 0, __ATOMIC_RELAXED,
							    __ATOMIC_RELAXED))
				;
			pthread_setspecific(sdp_pk_key, (void *)(intptr_t)(i + 1));
			sdp_pk_mine = i;
			return i;
		}
	}
	syscall(SYS_close, efd);
	return -1;
}

int sdp_pollkick_begin(void)
{
	int i = sdp_pk_slot();
	if (i < 0)
		return -1;
	__atomic_store_n(&sdp_pk[i].state, PK_IN, __ATOMIC_SEQ_CST);
	return __atomic_load_n(&sdp_pk[i].fd, __ATOMIC_RELAXED);
}

void sdp_pollkick_woke(void)
{
	int i = sdp_pk_mine;
	if (i >= 0) {
		uint64_t v;
		syscall(SYS_read, __atomic_load_n(&sdp_pk[i].fd, __ATOMIC_RELAXED), &v, sizeof v);
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
			int fd = __atomic_load_n(&sdp_pk[i].fd, __ATOMIC_ACQUIRE);
			uint64_t one = 1;
			if (fd >= 0)
				syscall(SYS_write, fd, &one, sizeof one); /* EAGAIN at the limit: readable already */
		}
}

void sdp_pollkick_forget_all(void)
{
	uint32_t hi = __atomic_load_n(&sdp_pk_hi, __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < hi; i++) {
		int fd = sdp_pk[i].fd;
		if (sdp_pk[i].state != PK_FREE && fd >= 0) {
			sdp_fd_set(fd, SDPSHIM_FD_UNMANAGED);
			syscall(SYS_close, fd);
		}
		sdp_pk[i].fd = -1;
		sdp_pk[i].state = PK_FREE;
	}
	sdp_pk_hi = 0;
	sdp_pk_mine = -1;
	if (sdp_pk_keyed)
		pthread_setspecific(sdp_pk_key, NULL);
}
