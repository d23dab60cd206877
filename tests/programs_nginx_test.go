package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nginx serving a 64 MiB file through sendfile to curl (sha256 checked)
// and a small page to wrk (64 connections) for 2 s (no socket error, no non-2xx
// response), in each mode, two ways:
//   - single: master_process off, one process accepts: verdicts as for
//     every pair, and with both shimmed the file goes through the shim's
//     sendfile onto the accelerated stream;
//   - prefork: a master and 2 workers accepting on the master's
//     listening socket: bytes always right; acceleration only where fork
//     children are supported (forkAccelerates).
func TestProgramsNginx(t *testing.T) {
	a := build(t)
	nginx := need(t, "nginx")
	curl := need(t, "curl")
	wrk := need(t, "wrk")
	www := t.TempDir()
	want := writeRandomFile(t, filepath.Join(www, "big.bin"), 64<<20)
	if err := os.WriteFile(filepath.Join(www, "index.html"), []byte(strings.Repeat("sdpshim ", 64)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, prefork := range []bool{false, true} {
		for _, m := range allModes {
			name := map[bool]string{false: "single/", true: "prefork/"}[prefork] + m.name
			t.Run(name, func(t *testing.T) {
				r := newPairRun(t, a, m)
				port := freePort(t)
				conf := nginxConf(t, www, port, prefork)
				srv := start(t, r.serverEnv(t), 90*time.Second, nginx, "-p", filepath.Dir(conf), "-c", conf,
					"-e", filepath.Join(filepath.Dir(conf), "error.log"))
				stopOnCleanup(t, srv, syscall.SIGTERM)
				waitListen(t, srv, port)
				out := filepath.Join(t.TempDir(), "got.bin")
				runTo(t, r.clientEnv(t), 60*time.Second, curl, "-sS", "--fail", "-o", out,
					fmt.Sprintf("http://127.0.0.1:%d/big.bin", port))
				if got := fileHash(t, out); got != want {
					t.Fatalf("file from nginx differs: sha256 %x, want %x", got, want)
				}
				res := runTo(t, r.clientEnv(t), 60*time.Second, wrk, "-t", "1", "-c", fmt.Sprint(wrkConns), "-d", "2",
					fmt.Sprintf("http://127.0.0.1:%d/index.html", port))
				checkWrk(t, res)
				// curl: 1 connection; wrk: wrkConns and its first probe.
				if prefork {
					r.checkForked(t, 1+wrkConns, 1) // wrk's probe: connected, closed unused
				} else {
					r.checkPair(t, 1+wrkConns, true)
				}
			})
		}
	}
}

// wrkConns is wrk's -c (one thread). wrk sizes each thread's event loop
// at 10+3*connections and refuses higher fds; the shim holds ~26 low
// descriptors (its PROTECTED fds, docs/preload.md) plus one per
// accelerated connection, so with few connections, or several threads,
// wrk's connects fail ("Socket errors: connect N").
const wrkConns = 64

// checkWrk checks wrk's report: requests made, no socket error, no
// response other than 2xx/3xx.
func checkWrk(t *testing.T, out string) {
	t.Helper()
	m := regexp.MustCompile(`(\d+) requests in`).FindStringSubmatch(out)
	if m == nil || m[1] == "0" || strings.Contains(out, "Socket errors") || strings.Contains(out, "Non-2xx") {
		t.Fatalf("wrk:\n%s", out)
	}
}

// nginxConf writes an nginx configuration serving www on 127.0.0.1:port
// from a fresh prefix directory and returns its path.
func nginxConf(t *testing.T, www string, port int, prefork bool) string {
	t.Helper()
	dir := t.TempDir()
	procs := "master_process off;\nworker_processes 1;"
	if prefork {
		procs = "master_process on;\nworker_processes 2;"
	}
	conf := fmt.Sprintf(`daemon off;
user root root;
%s
pid %[2]s/nginx.pid;
error_log %[2]s/error.log info;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  client_body_temp_path %[2]s/tmp;
  proxy_temp_path %[2]s/tmp;
  fastcgi_temp_path %[2]s/tmp;
  uwsgi_temp_path %[2]s/tmp;
  scgi_temp_path %[2]s/tmp;
  server { listen 127.0.0.1:%[3]d; root %[4]s; }
}
`, procs, dir, port, www)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
