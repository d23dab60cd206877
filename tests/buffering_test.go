package tests

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/shim/config"
)

// Both ends write before they read (testdata/both_write.py): each sends
// a message of 3 MB (or three quarters of the kernel's largest send
// buffer, if that is less) in one blocking call and only then reads the
// other's. Kernel TCP holds both messages unread and the two finish; a
// connection whose ring held less than a message each way would leave
// both writers waiting for a reader for ever (the direct path's ring was
// 1 MiB a direction until it followed tcp_wmem: shim/config/ring.go).
func TestBothWriteBeforeReading(t *testing.T) {
	a := build(t)
	python := need(t, "python3")
	size := min(3_000_000, config.KernelSendBuf()*3/4)
	script := filepath.Join("testdata", "both_write.py")
	for _, m := range []mode{{"kernel", false, false}, bothShimmed} {
		t.Run(m.name, func(t *testing.T) {
			r := newPairRun(t, a, m)
			port := freePort(t)
			srv := start(t, r.serverEnv(t), 60*time.Second, python, script, "server", fmt.Sprint(port), fmt.Sprint(size))
			waitListen(t, srv, port)
			out := runTo(t, r.clientEnv(t), 30*time.Second, python, script, "client", fmt.Sprint(port), fmt.Sprint(size))
			if strings.TrimSpace(out) != "ok" {
				t.Fatalf("client: %q", out)
			}
			if err := srv.wait(); err != nil || strings.TrimSpace(srv.out.String()) != "ok" {
				t.Fatalf("server: %v %q\n%s", err, srv.out.String(), srv.errb.String())
			}
			if m.accelerated() {
				r.serverExited = true
				r.checkPair(t, 1, false)
			}
		})
	}
}
