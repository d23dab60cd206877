package ctest

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHTTPServerCurl: curl downloads a 32 MiB file from python3 -m
// http.server, both under the shim, and the sha256 matches; with the fake
// core, both processes moved the bytes through it.
func TestHTTPServerCurl(t *testing.T) {
	b := artefacts(t)
	python := need(t, "python3")
	curl := need(t, "curl")
	root := t.TempDir()
	data := make([]byte, 32<<20)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(root, "blob"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	for _, s := range setups {
		t.Run(string(s), func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "fake.log")
			env := b.env(s, log)
			srv := exec.Command(python, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", root)
			srv.Env = env
			out, _ := srv.StdoutPipe()
			srv.Stderr = io.Discard
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				srv.Process.Signal(syscall.SIGINT) // KeyboardInterrupt: a clean exit
				done := make(chan struct{})
				go func() { srv.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					srv.Process.Kill()
					<-done
				}
				if s == fakecore {
					checkHTTPStats(t, fakeLog(t, log), len(data))
				}
			}()
			line, err := bufio.NewReader(out).ReadString('\n')
			port := regexp.MustCompile(`port (\d+)`).FindStringSubmatch(line)
			if err != nil || port == nil {
				t.Fatalf("http.server said %q (%v)", line, err)
			}
			dst := filepath.Join(t.TempDir(), "blob")
			r := runProg(t, env, curl, "-sS", "--fail", "-o", dst, "http://127.0.0.1:"+port[1]+"/blob")
			if r.err != nil {
				t.Fatalf("curl: %v %s", r.err, r.stderr)
			}
			got, _ := os.ReadFile(dst)
			gs := sha256.Sum256(got)
			if hex.EncodeToString(gs[:]) != want {
				t.Errorf("sha256 mismatch: got %d bytes", len(got))
			}
		})
	}
}

// checkHTTPStats: the server sent at least size bytes through the core and
// curl received at least size.
func checkHTTPStats(t *testing.T, log string, size int) {
	t.Helper()
	re := regexp.MustCompile(`in=(\d+) out=(\d+)`)
	sent, received := false, false
	for _, line := range events(log, "stats") {
		if m := re.FindStringSubmatch(line); m != nil {
			sent = sent || atoi(m[2]) >= size
			received = received || atoi(m[1]) >= size
		}
	}
	if !sent || !received {
		t.Errorf("the download did not go through the core both ways:\n%s", log)
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// TestExports: the library exports exactly the names of its version script,
// which are exactly the functions its sources mark SDP_EXPORT (plus the
// assembly vfork).
func TestExports(t *testing.T) {
	b := artefacts(t)
	need(t, "nm")
	mapText, err := os.ReadFile("../c/libsdpshim.map")
	if err != nil {
		t.Fatal(err)
	}
	body := regexp.MustCompile(`(?s)global:(.*)local:`).FindSubmatch(mapText)
	if body == nil {
		t.Fatal("no global: section in libsdpshim.map")
	}
	script := map[string]bool{}
	for _, f := range strings.FieldsFunc(string(body[1]), func(r rune) bool { return r == ';' || r == ' ' || r == '\n' }) {
		script[f] = true
	}
	out, err := exec.Command("nm", "-D", "--defined-only", b.lib).Output()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 3 {
			exported[f[2]] = true
		}
	}
	sources := map[string]bool{"vfork": true, "sdpshim_probe_fallback": true} // assembly
	files, _ := filepath.Glob("../c/*.c")
	re := regexp.MustCompile(`(?m)^SDP_EXPORT [^(]*?\b(\w+)\(`)
	for _, f := range files {
		src, _ := os.ReadFile(f)
		for _, m := range re.FindAllSubmatch(src, -1) {
			sources[string(m[1])] = true
		}
	}
	compare := func(aName string, a map[string]bool, bName string, b map[string]bool) {
		for k := range a {
			if !b[k] {
				t.Errorf("%s in %s but not in %s", k, aName, bName)
			}
		}
	}
	compare("the version script", script, "the library", exported)
	compare("the library", exported, "the version script", script)
	compare("the sources", sources, "the version script", script)
	compare("the version script", script, "the sources", sources)
}
