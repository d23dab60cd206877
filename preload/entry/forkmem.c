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
 * again: about 170 us of the 270 us a fork of a process running the core
 * cost beyond one without it. MADV_DONTFORK leaves such a mapping out of
 * every child. The child's signal stack may lie in it (the runtime gives a
 * program thread that calls into Go one of its own): the interposer's
 * fork child hook takes that away (preload/c/core.c, sdp_altstack_check).
 */
#define _GNU_SOURCE 1
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void *p = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	if (p != MAP_FAILED && (flags & MAP_ANONYMOUS) && (flags & MAP_PRIVATE))
		syscall(SYS_madvise, p, len, MADV_DONTFORK); /* best effort: the mapping is usable either way */
	return p;
}
