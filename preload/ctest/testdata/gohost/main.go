// Command gohost is a Go program linked with cgo (so the dynamic loader
// honours LD_PRELOAD) that makes TCP sockets both through libc and through
// Go's own net package. Under libsdpshim the core must never be loaded into
// it: a second Go runtime in one process is unsupported.
package main

/*
#include <sys/socket.h>
#include <unistd.h>
static int tcp_socket(void) { int fd = socket(AF_INET, SOCK_STREAM, 0); if (fd >= 0) close(fd); return fd; }
*/
import "C"

import (
	"fmt"
	"io"
	"net"
	"os"
)

func main() {
	if C.tcp_socket() < 0 {
		fmt.Println("libc socket failed")
		os.Exit(1)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	go func() {
		c, err := l.Accept()
		if err == nil {
			io.Copy(c, c)
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	c.Write([]byte("go host"))
	buf := make([]byte, 7)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "go host" {
		fmt.Println("echo failed", err)
		os.Exit(1)
	}
	fmt.Println("gohost ok")
}
