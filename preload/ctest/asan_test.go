package ctest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestAddressSanitizer builds the library with -fsanitize=address,undefined
// and runs
// the echo pair and the one-shot checks through it (libasan preloaded
// first, as it must be), with and without the fake core.
func TestAddressSanitizer(t *testing.T) {
	b := artefacts(t)
	out, err := exec.Command("gcc", "-print-file-name=libasan.so").Output()
	libasan := strings.TrimSpace(string(out))
	if err != nil || !filepath.IsAbs(libasan) {
		t.Skip("gcc has no libasan")
	}
	lib := filepath.Join(b.dir, "asan", "libsdpshim.so")
	os.MkdirAll(filepath.Dir(lib), 0o755)
	if err := run("sh", "../c/build.sh", lib, "-Werror", "-fsanitize=address,undefined",
		"-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer"); err != nil {
		t.Fatal(err)
	}
	for _, core := range []bool{false, true} {
		name := map[bool]string{false: "passthrough", true: "fakecore"}[core]
		t.Run(name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "fake.log")
			env := b.env(plain, "", "LD_PRELOAD="+libasan+":"+lib, "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=99")
			if core {
				env = append(env, "SDPSHIM_CORE="+b.fakecore, "FAKECORE_LOG="+log)
			}
			srv := startEchoServer(t, b, env, "epoll", 3)
			for i, io := range []string{"rw", "msg", "waitall"} {
				r := runProg(t, env, b.echo, "client", srv.port, "500000", strconv.Itoa(i), io)
				if r.err != nil || !strings.HasPrefix(r.stdout, "ok 500000") {
					t.Errorf("client %s: %v\n%s%s", io, r.err, r.stdout, r.stderr)
				}
			}
			srv.wait(t)
			for _, cmd := range []string{"files", "fcntl", "dup", "closerange", "fork", "vfork", "spawn", "sigpipe"} {
				r := runProg(t, env, b.misc, cmd)
				if r.err != nil || strings.TrimSpace(r.stdout) != "ok "+cmd {
					t.Errorf("misc %s: %v\n%s%s", cmd, r.err, r.stdout, r.stderr)
				}
			}
			if core && len(events(fakeLog(t, log), "init")) == 0 {
				t.Errorf("the fake core was never loaded")
			}
		})
	}
}
