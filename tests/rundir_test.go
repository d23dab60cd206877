package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An unusable SDPSHIM_RUNDIR (a file, open to others, owned by another
// user, a symlink): both ends run on kernel TCP, each logs why at warn,
// and each connection's fallback is counted with reason rundir-unusable
// (the count's debug line names it: the stats socket lives in the run
// directory, so `sdpshim stats` cannot reach these processes).
func TestUnusableRunDir(t *testing.T) {
	a := build(t)
	cases := map[string]func(t *testing.T, dir string) string{
		"file": func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "rd")
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		},
		"world-writable": func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "rd")
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, 0o777); err != nil {
				t.Fatal(err)
			}
			return p
		},
		"other-owner": func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "rd")
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Skipf("chown needs root: %v", err)
			}
			return p
		},
		"symlink": func(t *testing.T, dir string) string {
			real := filepath.Join(dir, "real")
			if err := os.Mkdir(real, 0o700); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, "rd")
			if err := os.Symlink(real, p); err != nil {
				t.Fatal(err)
			}
			return p
		},
	}
	for name, prepare := range cases {
		t.Run(name, func(t *testing.T) {
			if name == "other-owner" && os.Geteuid() != 0 {
				t.Skip("needs root to give the directory away")
			}
			d, err := os.MkdirTemp("", "sdprd")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(d) })
			rd := prepare(t, d)
			logs := t.TempDir()
			srvSide := side{shim: true, log: filepath.Join(logs, "server.log")}
			cliSide := side{shim: true, log: filepath.Join(logs, "client.log")}
			srv := start(t, a.environ(t, srvSide, rd), 30*time.Second, a.pingpong, "server", "-a", "127.0.0.1", "-p", "0")
			port := srv.listening(t)
			cli := start(t, a.environ(t, cliSide, rd), 30*time.Second, a.pingpong, "client", "-a", "127.0.0.1",
				"-p", fmt.Sprint(port), "-n", "100", "-s", "64")
			if err := cli.wait(); err != nil {
				t.Fatalf("client: %v\n%s", err, cli.errb.String())
			}
			if err := srv.wait(); err != nil {
				t.Fatalf("server: %v\n%s", err, srv.errb.String())
			}
			result(t, srv.out.String(), "server")
			for who, log := range map[string]string{"server": srvSide.log, "client": cliSide.log} {
				l := readLog(t, log)
				if !strings.Contains(l, "level=warning") || !strings.Contains(l, "rundir-unusable") {
					t.Errorf("%s: no warning naming rundir-unusable:\n%s", who, l)
				}
				if !strings.Contains(l, `msg="connection stays on kernel TCP"`) || !strings.Contains(l, "reason=rundir-unusable") {
					t.Errorf("%s: the connection's fallback was not counted as rundir-unusable:\n%s", who, l)
				}
				if strings.Contains(l, "accelerated") && !strings.Contains(l, "stays on kernel TCP") {
					t.Errorf("%s: accelerated through an unusable run directory:\n%s", who, l)
				}
			}
		})
	}
}
