/*
 * fdtable.c - one state byte per fd (enum sdpshim_fd_state).
 *
 * Readers (every interposed call) load a directory slot and a byte: no lock.
 * Writers store the byte atomically; a chunk is created by the first writer
 * of its range and published with a compare-and-swap (a loser unmaps its
 * own). Nothing is ever moved or freed, so a reader holding a chunk pointer
 * stays valid forever, a signal handler may write at any point, and a fork
 * child inherits a consistent table without any lock to reset.
 */
#include "shim.h"

#include <sys/mman.h>

unsigned char *sdp_fd_dir[SDP_FD_DIR];
unsigned long sdp_fd_special;
int sdp_deferred_hint;
int sdp_fd_hi = -1;

static unsigned char *sdp_fd_chunk(unsigned int i)
{
	unsigned char *c = __atomic_load_n(&sdp_fd_dir[i], __ATOMIC_ACQUIRE);
	if (c != NULL)
		return c;
	void *m = mmap(NULL, SDP_FD_CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	unsigned char *expected = NULL;
	if (__atomic_compare_exchange_n(&sdp_fd_dir[i], &expected, (unsigned char *)m, 0, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE))
		return m;
	munmap(m, SDP_FD_CHUNK);
	return expected;
}

/* Raises sdp_fd_hi to fd. */
static void sdp_fd_raise_hi(int fd)
{
	int hi = __atomic_load_n(&sdp_fd_hi, __ATOMIC_RELAXED);
	while (fd > hi && !__atomic_compare_exchange_n(&sdp_fd_hi, &hi, fd, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* fd went from state from to state to: the count of special fds and the
 * highest fd marked follow. */
static void sdp_fd_changed(int fd, int from, int to)
{
	int delta = sdp_fd_is_special(to) - sdp_fd_is_special(from);
	if (delta > 0)
		__atomic_add_fetch(&sdp_fd_special, 1, __ATOMIC_RELAXED);
	else if (delta < 0)
		__atomic_sub_fetch(&sdp_fd_special, 1, __ATOMIC_RELAXED);
	if (to != SDPSHIM_FD_UNMANAGED)
		sdp_fd_raise_hi(fd);
}

int sdp_fd_set(int fd, int state)
{
	if (fd < 0)
		return -EBADF;
	if (state < SDPSHIM_FD_UNMANAGED || state >= SDP_FD_STATES)
		return -EINVAL;
	/* A vfork child shares its parent's memory but not its fd table. */
	if (sdp_vfork_child)
		return 0;
	unsigned int i = (unsigned int)fd >> SDP_FD_CHUNK_SHIFT;
	unsigned char *c;
	if (state == SDPSHIM_FD_UNMANAGED) {
		c = __atomic_load_n(&sdp_fd_dir[i], __ATOMIC_ACQUIRE);
		if (c == NULL)
			return 0;
	} else if ((c = sdp_fd_chunk(i)) == NULL) {
		return -ENOMEM;
	}
	unsigned char old = __atomic_exchange_n(&c[(unsigned int)fd & (SDP_FD_CHUNK - 1)], (unsigned char)state,
						 __ATOMIC_ACQ_REL);
	sdp_fd_changed(fd, old, state);
	return 0;
}

int sdp_fd_cas(int fd, int from, int to)
{
	if (fd < 0 || from < 0 || from >= SDP_FD_STATES || to < 0 || to >= SDP_FD_STATES || sdp_vfork_child)
		return 0;
	unsigned char *c = sdp_fd_chunk((unsigned int)fd >> SDP_FD_CHUNK_SHIFT);
	if (c == NULL)
		return 0;
	unsigned char want = (unsigned char)from;
	if (!__atomic_compare_exchange_n(&c[(unsigned int)fd & (SDP_FD_CHUNK - 1)], &want, (unsigned char)to, 0,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return 0;
	sdp_fd_changed(fd, from, to);
	return 1;
}

unsigned long sdp_fd_recast(const signed char to[SDP_FD_STATES], int counted)
{
	unsigned long n = 0;
	int hi = __atomic_load_n(&sdp_fd_hi, __ATOMIC_RELAXED);
	for (int fd = 0; fd <= hi; fd++) {
		int s = sdp_fd_state_raw(fd);
		if (s == SDPSHIM_FD_UNMANAGED || s >= SDP_FD_STATES || to[s] < 0)
			continue;
		if (s == counted)
			n++;
		sdp_fd_set(fd, to[s]);
	}
	return n;
}

unsigned long sdp_fd_forget_all(void)
{
	/* CANDIDATE, unseen and deferred ones stay for the child's own core
	 * (one the parent was adopting is unseen: the adopting thread is not
	 * in the child); INHERITED ones wait for their own resolution (a
	 * grandchild of the process that kept them: forkkeep.c). */
	static const signed char to[SDP_FD_STATES] = {-1, -1, SDPSHIM_FD_UNMANAGED, SDPSHIM_FD_UNMANAGED, -1, -1, -1, SDP_FD_UNSEEN};
	return sdp_fd_recast(to, SDPSHIM_FD_MANAGED);
}

void **sdp_fd_ptr_slot(struct sdp_fd_ptrs *t, int fd, int make)
{
	unsigned int i = (unsigned int)fd >> SDP_FD_CHUNK_SHIFT;
	if (fd < 0 || i >= SDP_FD_DIR)
		return NULL;
	void **c = __atomic_load_n(&t->dir[i], __ATOMIC_ACQUIRE);
	if (c == NULL && make) {
		void *m = mmap(NULL, SDP_FD_CHUNK * sizeof *c, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return NULL;
		void **none = NULL;
		if (__atomic_compare_exchange_n(&t->dir[i], &none, (void **)m, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			c = m;
		} else {
			munmap(m, SDP_FD_CHUNK * sizeof *c);
			c = none;
		}
	}
	if (c == NULL)
		return NULL;
	if (make) { /* bounds sdp_fd_ptr_clear_all */
		int end = __atomic_load_n(&t->end, __ATOMIC_RELAXED);
		while (fd >= end && !__atomic_compare_exchange_n(&t->end, &end, fd + 1, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
	}
	return &c[(unsigned int)fd & (SDP_FD_CHUNK - 1)];
}

void sdp_fd_ptr_clear_all(struct sdp_fd_ptrs *t)
{
	int end = __atomic_load_n(&t->end, __ATOMIC_RELAXED);
	for (int fd = 0; fd < end; fd += SDP_FD_CHUNK) {
		void **c = __atomic_load_n(&t->dir[(unsigned int)fd >> SDP_FD_CHUNK_SHIFT], __ATOMIC_ACQUIRE);
		int n = end - fd < (int)SDP_FD_CHUNK ? end - fd : (int)SDP_FD_CHUNK;
		for (int j = 0; c != NULL && j < n; j++)
			if (__atomic_load_n(&c[j], __ATOMIC_RELAXED) != NULL)
				__atomic_store_n(&c[j], NULL, __ATOMIC_RELAXED);
	}
}
