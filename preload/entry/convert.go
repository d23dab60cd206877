package main

/*
#include "sdpshim_core.h"
#include <sys/uio.h>
*/
import "C"

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/shim"
)

// maxIO is the most one call moves, as the kernel caps reads and writes
// (MAX_RW_COUNT): a larger length is a short count, never a bigger slice.
const maxIO = 0x7ffff000

// uioMaxIOV is UIO_MAXIOV, the most iovecs one call takes.
const uioMaxIOV = 1024

func clampLen(n C.size_t) int { return int(min(uint64(n), maxIO)) }

// bytesAt views n bytes of C memory at p as a slice (nil when empty).
func bytesAt(p unsafe.Pointer, n C.size_t) []byte {
	if p == nil || n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(p), clampLen(n))
}

// iovArray returns a msghdr's iovec array; false for a NULL msghdr, or a
// NULL array with a non-zero count, or more than uioMaxIOV of them.
func iovArray(msg *C.struct_msghdr) ([]C.struct_iovec, bool) {
	if msg == nil {
		return nil, false
	}
	n := int(msg.msg_iovlen)
	if n == 0 {
		return nil, true
	}
	if msg.msg_iov == nil || n > uioMaxIOV {
		return nil, false
	}
	return unsafe.Slice(msg.msg_iov, n), true
}

// iovecs views a msghdr's iovecs as slices, appended to store (at most
// maxIO bytes in all); false for a bad array (iovArray) or a NULL iovec
// with a non-zero length.
func iovecs(msg *C.struct_msghdr, store [][]byte) ([][]byte, bool) {
	vs, ok := iovArray(msg)
	if !ok {
		return nil, false
	}
	total := 0
	for _, v := range vs {
		if v.iov_base == nil && v.iov_len > 0 {
			return nil, false
		}
		b := bytesAt(v.iov_base, v.iov_len)
		if total+len(b) > maxIO {
			b = b[:maxIO-total]
		}
		total += len(b)
		store = append(store, b)
	}
	return store, true
}

// iovLen returns the bytes a msghdr's iovecs hold, without looking at
// their memory (at most maxIO); false for a bad array (iovArray).
func iovLen(msg *C.struct_msghdr) (int, bool) {
	vs, ok := iovArray(msg)
	total := 0
	for _, v := range vs {
		total = min(total+clampLen(v.iov_len), maxIO)
	}
	return total, ok
}

// pollfds views a C pollfd array.
func pollfds(p *C.struct_pollfd, n C.nfds_t) []unix.PollFd {
	if p == nil || n == 0 {
		return nil
	}
	return unsafe.Slice((*unix.PollFd)(unsafe.Pointer(p)), int(n))
}

// goEnviron copies a NULL-terminated environment.
func goEnviron(envp **C.char) []string {
	var env []string
	if envp == nil {
		return env
	}
	for p := envp; *p != nil; p = (**C.char)(unsafe.Add(unsafe.Pointer(p), unsafe.Sizeof(*p))) {
		env = append(env, C.GoString(*p))
	}
	return env
}

// waitResult copies a shim wait request into the C struct when the hook
// asks the interposer to sleep.
func waitResult(r int64, gw *shim.Wait, w *C.struct_sdpshim_wait) int64 {
	if r == shim.WaitResult && w != nil {
		w.kind = C.int32_t(gw.Kind)
		w.fd = C.int32_t(gw.FD)
		w.events = C.int16_t(gw.Events)
		w.val = C.uint32_t(gw.Val)
		w.word = (*C.uint32_t)(unsafe.Pointer(gw.Word))
		w.timeout_ns = C.int64_t(gw.Timeout)
		w.done = C.uint64_t(gw.Done)
	}
	return r
}
