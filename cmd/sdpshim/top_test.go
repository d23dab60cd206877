package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/shim/stats"
)

func TestTopOnce(t *testing.T) {
	environ, reg, _ := statsServer(t)
	c := reg.Open(stats.ConnInfo{FD: 11, Transport: stats.TransportSHM})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				c.Sent(1 << 20)
			}
		}
	}()
	code, stdout, stderr := runWith(environ, "top", "--once", "--interval", "200ms")
	close(stop)
	<-done
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if strings.Contains(stdout, "\x1b[") {
		t.Error("--once cleared the screen")
	}
	var proc string
	var fds []string // the connection table's fd column, in order
	for _, line := range strings.Split(stdout, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 10 && f[0] == strconv.Itoa(os.Getpid()) && f[2] == "3":
			proc = line
		case len(f) == 10 && f[0] == strconv.Itoa(os.Getpid()):
			fds = append(fds, f[2])
		}
	}
	if proc == "" {
		t.Fatalf("no process line with 3 open connections:\n%s", stdout)
	}
	if tx := strings.Fields(proc)[3]; !strings.HasSuffix(tx, "MiB") {
		t.Errorf("process TX/s %q, want MiB per second", tx)
	}
	if len(fds) != 3 || fds[0] != "11" {
		t.Errorf("connections by fd %v, want 3 with the busiest (fd 11) first:\n%s", fds, stdout)
	}
	if code, _, stderr := runWith(environ, "top", "--interval", "0s"); code != exitUsage || !strings.Contains(stderr, "usage: sdpshim top") {
		t.Errorf("--interval 0: exit %d, stderr %q", code, stderr)
	}
}
