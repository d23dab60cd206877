//go:build rdma && linux && cgo

package rdma

// #include "sdp_verbs.h"
import "C"

import (
	"fmt"
	"unsafe"
)

// cArray is n zeroed elements of T in C memory (calloc), viewed from Go as
// a slice. C may hold the address; Go never stores a Go pointer in it.
type cArray[T any] struct {
	ptr unsafe.Pointer
	s   []T
}

func newCArray[T any](n int) (cArray[T], error) {
	var zero T
	p := C.calloc(C.size_t(max(n, 1)), C.size_t(unsafe.Sizeof(zero)))
	if p == nil {
		return cArray[T]{}, fmt.Errorf("rdma: calloc %d x %d bytes failed", n, unsafe.Sizeof(zero))
	}
	return cArray[T]{ptr: p, s: unsafe.Slice((*T)(p), n)}, nil
}

func (a *cArray[T]) free() {
	if a.ptr != nil {
		C.free(a.ptr)
	}
	*a = cArray[T]{}
}

// Typed C views of the arrays, for the calls that take them.
func swrPtr(a cArray[wireSend]) *C.struct_sdp_swr        { return (*C.struct_sdp_swr)(a.ptr) }
func rwrPtr(a cArray[wireRecv]) *C.struct_sdp_rwr        { return (*C.struct_sdp_rwr)(a.ptr) }
func sgePtr(a cArray[wireSGE]) *C.struct_ibv_sge         { return (*C.struct_ibv_sge)(a.ptr) }
func wcOutPtr(a cArray[wireCompletion]) *C.struct_sdp_wc { return (*C.struct_sdp_wc)(a.ptr) }
func sendWRPtr(p unsafe.Pointer) *C.struct_ibv_send_wr   { return (*C.struct_ibv_send_wr)(p) }
func recvWRPtr(p unsafe.Pointer) *C.struct_ibv_recv_wr   { return (*C.struct_ibv_recv_wr)(p) }
func wcPtr(p unsafe.Pointer) *C.struct_ibv_wc            { return (*C.struct_ibv_wc)(p) }

// callocBytes allocates n zeroed elements of size bytes each (for C
// structs Go does not mirror).
func callocBytes(n int, size uintptr) (unsafe.Pointer, error) {
	p := C.calloc(C.size_t(max(n, 1)), C.size_t(size))
	if p == nil {
		return nil, fmt.Errorf("rdma: calloc %d x %d bytes failed", n, size)
	}
	return p, nil
}

func cfree(p unsafe.Pointer) {
	if p != nil {
		C.free(p)
	}
}

// regionBase returns the address of a mapping's first byte.
func regionBase(mem []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(mem)) }
