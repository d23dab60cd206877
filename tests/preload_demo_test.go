package tests

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The bundled demo programs (plain sockets C, demo/*.c) with both sides
// shimmed are accelerated and byte-correct: the shims log the accepted and
// connected streams, and the kernel's TCP counters show (about) none of
// the payload on the TCP connection beside the stream.
func TestDemoProgramsAccelerated(t *testing.T) {
	a := build(t)
	need(t, "ss")
	for _, tc := range []struct {
		prog string
		args []string
	}{
		{"pingpong", []string{"-s", "64", "-t", "1"}},
		{"pingpong", []string{"-s", "4096", "-t", "1"}},
		{"stream", []string{"-s", "65536", "-t", "1"}},
		{"stream", []string{"-s", "256", "-t", "1"}},
	} {
		t.Run(tc.prog+strings.Join(tc.args[:2], ""), func(t *testing.T) {
			rd := runDir(t)
			logs := t.TempDir()
			srvSide := side{shim: true, log: filepath.Join(logs, "server.log")}
			cliSide := side{shim: true, log: filepath.Join(logs, "client.log")}
			bin := map[string]string{"pingpong": a.pingpong, "stream": a.stream}[tc.prog]
			srv := start(t, a.environ(t, srvSide, rd), 30*time.Second, bin, "server", "-a", "127.0.0.1", "-p", "0")
			port := srv.listening(t)
			samples := sampleKernel(port)
			args := append([]string{"client", "-a", "127.0.0.1", "-p", fmt.Sprint(port)}, tc.args...)
			cli := start(t, a.environ(t, cliSide, rd), 30*time.Second, bin, args...)
			if err := cli.wait(); err != nil {
				t.Fatalf("client: %v\n%s", err, cli.errb.String())
			}
			if err := srv.wait(); err != nil {
				t.Fatalf("server: %v\n%s", err, srv.errb.String())
			}
			kb, n := samples.finish()
			res := result(t, srv.out.String(), "server")
			appBytes, _ := res["bytes"].(float64)
			if tc.prog == "stream" && res["verified"] != true {
				t.Fatalf("server did not verify the stream: %v", res)
			}
			if appBytes <= 0 {
				t.Fatalf("server read no bytes: %v", res)
			}
			for who, log := range map[string]string{"server": srvSide.log, "client": cliSide.log} {
				want := map[string]string{"server": "accepted accelerated", "client": "connected accelerated"}[who]
				if l := readLog(t, log); !strings.Contains(l, want) {
					t.Errorf("%s log lacks %q:\n%s", who, want, l)
				}
			}
			if n > 0 && float64(kb) > 0.01*appBytes {
				t.Errorf("kernel TCP carried %d of %d payload bytes: not accelerated", kb, int64(appBytes))
			}
			t.Logf("%s: %v; kernel TCP bytes %d in %d samples", tc.prog, res, kb, n)
		})
	}
}

// One side shimmed, the other plain: the shimmed side falls back with the
// reason peer-not-shimmed and the bytes are exactly those of kernel TCP.
func TestDemoProgramsMixed(t *testing.T) {
	a := build(t)
	for _, shimServer := range []bool{false, true} {
		name := map[bool]string{false: "shimmed-client", true: "shimmed-server"}[shimServer]
		t.Run(name, func(t *testing.T) {
			rd := runDir(t)
			logs := t.TempDir()
			srvSide := side{shim: shimServer, log: filepath.Join(logs, "server.log")}
			cliSide := side{shim: !shimServer, log: filepath.Join(logs, "client.log")}
			srv := start(t, a.environ(t, srvSide, rd), 30*time.Second, a.stream, "server", "-a", "127.0.0.1", "-p", "0")
			port := srv.listening(t)
			cli := start(t, a.environ(t, cliSide, rd), 30*time.Second, a.stream,
				"client", "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-s", "4096", "-n", "20000")
			if err := cli.wait(); err != nil {
				t.Fatalf("client: %v\n%s", err, cli.errb.String())
			}
			if err := srv.wait(); err != nil {
				t.Fatalf("server: %v\n%s", err, srv.errb.String())
			}
			res := result(t, srv.out.String(), "server")
			if res["verified"] != true || res["bytes"] != float64(4096*20000) {
				t.Fatalf("server result %v, want all %d bytes verified", res, 4096*20000)
			}
			shimmed := cliSide
			if shimServer {
				shimmed = srvSide
			}
			l := readLog(t, shimmed.log)
			if !strings.Contains(l, "connection stays on kernel TCP") || !strings.Contains(l, "reason=peer-not-shimmed") {
				t.Errorf("shimmed side did not fall back with reason peer-not-shimmed:\n%s", l)
			}
			if strings.Contains(l, "accelerated\"") || strings.Contains(l, "msg=\"connected accelerated") ||
				strings.Contains(l, "msg=\"accepted accelerated") {
				t.Errorf("shimmed side claims acceleration with a plain peer:\n%s", l)
			}
		})
	}
}
