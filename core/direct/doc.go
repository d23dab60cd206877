// Package direct is the Go side of the direct data path: the shared area
// of one accelerated connection (status-byte blocks both ways, the words
// sleepers announce themselves in) and a process's handle on one side of
// it. The protocol itself is C (preload/c/direct.c, compiled into this
// package with cgo), so the interposer, which moves the bytes of the
// program's calls without entering Go, a fork child without a Go runtime,
// and the Go core all run one implementation of it; docs/direct.md
// describes it and why.
//
// The Go core creates an area per connection (NewArea), passes its memfd
// to the peer, which maps it (MapArea), and each side opens its handle
// (Open). The handle lives in C memory, so the interposer can keep its
// address (host direct_attach) and the core can still read and set it.
package direct
