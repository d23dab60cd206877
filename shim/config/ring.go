package config

import (
	"bytes"
	"os"
	"strconv"
)

// How many blocks a direction holds by default. A connection's ring is
// its socket buffer: what one side may have written that the other has
// not read yet. Kernel TCP lets a writer get about its largest send
// buffer (net.ipv4.tcp_wmem's third value, 4 MiB unless the host was
// tuned) ahead of a peer that does not read, and programs lean on it
// without knowing: two ends that each write a 2 MB message before
// reading the other's finish on kernel TCP and would wait for each other
// for ever on a 1 MiB ring. So the direct path's ring holds what that
// buffer holds. A blocking sender keeps within 1 MiB of a reader that
// reads on, and takes the rest only when the reader stops
// (preload/c/direct.c, "The reach"), so a bulk stream's bytes stay warm
// in the caches and its pages few; the pages are only touched as bytes
// wait in them (a sender fills the lowest free block) and given back a
// second after the connection goes quiet (shim/trim.go), as a kernel
// socket's buffer grows and shrinks. The channel modes, which share one
// ring among many streams (and on RDMA register it), keep defaultBlocks.
const (
	defaultBlocks = 64      // the channel modes' ring, and the least auto gives
	maxAutoBlocks = 1024    // the most auto gives: 16 MiB of 16 KiB blocks
	usualSendBuf  = 4 << 20 // tcp_wmem's largest when it cannot be read
	tcpWmemPath   = "/proc/sys/net/ipv4/tcp_wmem"
)

// autoBlocks returns the blocks of blockSize payload bytes that hold
// sendBuf bytes, a power of two from defaultBlocks to maxAutoBlocks.
func autoBlocks(sendBuf, blockSize int) int {
	n := defaultBlocks
	for n < maxAutoBlocks && n*blockSize < sendBuf {
		n *= 2
	}
	return n
}

// KernelSendBuf returns the kernel's largest TCP send buffer in bytes
// (the third value of net.ipv4.tcp_wmem, in this network namespace), or
// usualSendBuf when it cannot be read.
func KernelSendBuf() int {
	b, err := os.ReadFile(tcpWmemPath)
	if err != nil {
		return usualSendBuf
	}
	return parseWmem(b)
}

// parseWmem reads tcp_wmem's text ("min default max"): its max, or
// usualSendBuf when the text is not three positive numbers.
func parseWmem(b []byte) int {
	f := bytes.Fields(b)
	if len(f) != 3 {
		return usualSendBuf
	}
	n, err := strconv.Atoi(string(f[2]))
	if err != nil || n <= 0 {
		return usualSendBuf
	}
	return n
}
