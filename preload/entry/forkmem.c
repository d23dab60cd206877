/*
 * forkmem.c - the Go runtime's memory stays out of fork children.
 *
 * With cgo the runtime takes all of its memory (heap arenas, goroutine
 * and signal stacks, its metadata) through runtime/cgo's x_cgo_mmap,
 * which calls mmap(). That reference binds to the definition below, not
 * to libc's: this library's own symbols come first (DT_SYMBOLIC), and the
 * version script keeps the name local, so no other object's mmap calls
 * reach it. Nothing else in the core calls mmap() (Go code maps areas with
 * raw system calls).
 *
 * A fork child never enters this copy's runtime (fork.c), so the runtime's
 * memory is of no use there, yet fork() copied every page table entry of
 * it, write-protected every one of its pages in the parent (each first
 * write afterwards is a fault), and the child's exit tore it all down
 * again: about a quarter of what a fork of a process running the core
 * cost beyond one without it (docs/preload.md). MADV_DONTFORK leaves such
 * a mapping out of every child. The child's signal stack may lie in it (the runtime gives a
 * program thread that calls into Go one of its own): the interposer's
 * fork child hook takes that away (preload/c/core.c, sdp_altstack_check).
 *
 * A fork the interposer does not see (libc's own, in daemon()) makes a
 * child that goes on as the process and may enter this runtime: before
 * such a fork the interposer calls sdpshim_core_fork_inherit, which makes
 * every mapping marked so far inheritable again and stops marking. The
 * mappings are remembered for that (up to the table's size; past it,
 * marking stops, and later mappings are inherited as without this file).
 */
#define _GNU_SOURCE 1
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FORKMEM_MAX 4096

static struct {
	void *addr;
	size_t len;
} forkmem[FORKMEM_MAX];
static int forkmem_n;   /* entries taken (the runtime maps from several threads) */
static int forkmem_off; /* set: no more marking */

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void *p = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	if (p == MAP_FAILED || !(flags & MAP_ANONYMOUS) || !(flags & MAP_PRIVATE) ||
	    __atomic_load_n(&forkmem_off, __ATOMIC_ACQUIRE))
		return p;
	int i = __atomic_fetch_add(&forkmem_n, 1, __ATOMIC_ACQ_REL);
	if (i >= FORKMEM_MAX) {
		__atomic_store_n(&forkmem_off, 1, __ATOMIC_RELEASE);
		return p;
	}
	forkmem[i].addr = p;
	__atomic_store_n(&forkmem[i].len, len, __ATOMIC_RELEASE);
	syscall(SYS_madvise, p, len, MADV_DONTFORK); /* best effort: the mapping is usable either way */
	if (__atomic_load_n(&forkmem_off, __ATOMIC_ACQUIRE))
		syscall(SYS_madvise, p, len, MADV_DOFORK); /* fork_inherit ran meanwhile */
	return p;
}

/* Before a fork whose child may go on in this runtime. Async-signal-safe. */
__attribute__((visibility("default"))) void sdpshim_core_fork_inherit(void)
{
	if (__atomic_exchange_n(&forkmem_off, 1, __ATOMIC_ACQ_REL))
		return;
	int n = __atomic_load_n(&forkmem_n, __ATOMIC_ACQUIRE);
	for (int i = 0; i < n && i < FORKMEM_MAX; i++)
		if (__atomic_load_n(&forkmem[i].len, __ATOMIC_ACQUIRE) > 0)
			syscall(SYS_madvise, forkmem[i].addr, forkmem[i].len, MADV_DOFORK);
}
