// Package freeport picks the TCP port a benchmark's server listens on.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
)

// Loopback returns a TCP port free on 127.0.0.1 now: below the kernel's
// ephemeral range when it can (an outgoing connection cannot take such a
// port between this check and the server's bind, as it can an ephemeral
// one), else whatever the kernel hands out.
func Loopback() (int, error) {
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		fmt.Sscan(string(b), &lo)
	}
	for i := 0; lo > 11000 && i < 200; i++ {
		port := 10000 + rand.IntN(lo-10000)
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			l.Close()
			return port, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
