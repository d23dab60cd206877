package ctest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadPolicy: when the core is loaded, when not, and what is said about
// it. The program (misc fcntl) must work in every case.
func TestLoadPolicy(t *testing.T) {
	b := artefacts(t)
	partial := filepath.Join(b.dir, "partial-core.so")
	src := filepath.Join(b.dir, "partial-core.c")
	os.WriteFile(src, []byte("int sdpshim_core_init(void *h, char **e) { (void)h, (void)e; return 0; }\n"), 0o644)
	if err := run("gcc", "-shared", "-fPIC", "-o", partial, src); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		env     []string
		loaded  bool   // the fake core's init ran
		running bool   // and it got sockets
		stderr  string // substring of stderr; "" = stderr empty
	}{
		{"default", nil, true, true, ""},
		{"enable=1", []string{"SDPSHIM_ENABLE=1"}, true, true, ""},
		{"enable=yes", []string{"SDPSHIM_ENABLE= Yes "}, true, true, ""},
		{"enable=blank", []string{"SDPSHIM_ENABLE= "}, true, true, ""},
		{"enable=0", []string{"SDPSHIM_ENABLE=0"}, false, false, ""},
		{"enable=off", []string{"SDPSHIM_ENABLE=OFF"}, false, false, ""},
		{"enable=bad", []string{"SDPSHIM_ENABLE=maybe"}, false, false,
			`sdpshim: SDPSHIM_ENABLE="maybe": expected 1 or 0 (also true/false, yes/no, on/off); the shim is disabled, the program runs on plain TCP`},
		{"core=relative", []string{"SDPSHIM_CORE=lib/core.so"}, false, false,
			`SDPSHIM_CORE="lib/core.so": expected an absolute path`},
		{"core=missing", []string{"SDPSHIM_CORE=/nonexistent/core.so"}, false, false,
			`SDPSHIM_CORE="/nonexistent/core.so": cannot load it`},
		{"core=partial", []string{"SDPSHIM_CORE=" + partial, "SDPSHIM_LOG_LEVEL=warn"}, false, false,
			"lacks sdpshim_core_socket"},
		{"core=partial,quiet", []string{"SDPSHIM_CORE=" + partial}, false, false, ""},
		{"core declines", []string{"FAKECORE_MODE=disable", "SDPSHIM_LOG_LEVEL=info"}, true, false,
			"core declined to run"},
		{"core fails", []string{"FAKECORE_MODE=fail", "SDPSHIM_LOG_LEVEL=warn"}, true, false,
			"core failed to start"},
		{"log to file", []string{"SDPSHIM_ENABLE=bogus", "SDPSHIM_LOG_LEVEL=error", "SDPSHIM_LOG_FILE=" + filepath.Join(b.dir, "policy.log")},
			false, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "fake.log")
			r := runProg(t, b.env(fakecore, log, c.env...), b.misc, "fcntl")
			if r.err != nil || strings.TrimSpace(r.stdout) != "ok fcntl" {
				t.Fatalf("misc fcntl: %v\n%s%s", r.err, r.stdout, r.stderr)
			}
			lg := fakeLog(t, log)
			if got := len(events(lg, "init")) == 1; got != c.loaded {
				t.Errorf("core loaded: %v, want %v\n%s", got, c.loaded, lg)
			}
			if got := len(events(lg, "socket")) > 0; got != c.running {
				t.Errorf("core got sockets: %v, want %v\n%s", got, c.running, lg)
			}
			if c.stderr == "" && r.stderr != "" {
				t.Errorf("unexpected stderr: %s", r.stderr)
			}
			if c.stderr != "" && strings.Count(r.stderr, c.stderr) != 1 {
				t.Errorf("stderr %q, want one %q", r.stderr, c.stderr)
			}
		})
	}
	data, _ := os.ReadFile(filepath.Join(b.dir, "policy.log"))
	if !strings.Contains(string(data), `SDPSHIM_ENABLE="bogus"`) {
		t.Errorf("SDPSHIM_LOG_FILE did not get the report: %q", data)
	}
}

// TestDefaultCoreLocation: without SDPSHIM_CORE the core is the
// libsdpshim-core.so beside libsdpshim.so, found through the library's own
// absolute path even when LD_PRELOAD named it relative to the directory the
// program started in.
func TestDefaultCoreLocation(t *testing.T) {
	b := artefacts(t)
	dir := t.TempDir()
	for from, to := range map[string]string{b.lib: "libsdpshim.so", b.fakecore: "libsdpshim-core.so"} {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, to), data, 0o755)
	}
	log := filepath.Join(dir, "fake.log")
	env := b.env(plain, "", "LD_PRELOAD=./libsdpshim.so", "FAKECORE_LOG="+log)
	cmd := exec.Command(b.misc, "dup")
	cmd.Dir, cmd.Env = dir, env
	if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "ok dup" {
		t.Fatalf("misc dup: %v %s", err, out)
	}
	lg := fakeLog(t, log)
	want := "shim=" + filepath.Join(dir, "libsdpshim.so")
	if inits := events(lg, "init"); len(inits) != 1 || !strings.HasSuffix(inits[0], want) {
		t.Errorf("want one init with %s:\n%s", want, lg)
	}
}

// TestNoTCPNoCore: programs that make no TCP socket never load the core.
func TestNoTCPNoCore(t *testing.T) {
	b := artefacts(t)
	log := filepath.Join(t.TempDir(), "fake.log")
	env := b.env(fakecore, log)
	for _, argv := range [][]string{{b.misc, "udp"}, {"ls", "/"}, {"sh", "-c", "echo hi | cat > /dev/null"}} {
		if r := runProg(t, env, argv[0], argv[1:]...); r.err != nil {
			t.Errorf("%v: %v %s", argv, r.err, r.stderr)
		}
	}
	if lg := fakeLog(t, log); lg != "" {
		t.Errorf("the core was loaded:\n%s", lg)
	}
}

// TestConstructorOrder: a library whose constructor uses TCP before
// libsdpshim's constructor has run (and, with the fake core, loads the core
// from there) works.
func TestConstructorOrder(t *testing.T) {
	b := artefacts(t)
	for _, s := range setups {
		t.Run(string(s), func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "fake.log")
			r := runProg(t, b.env(s, log), b.ctormain)
			if r.err != nil || strings.TrimSpace(r.stdout) != "ctor ok" {
				t.Fatalf("ctormain: %v\n%s%s", r.err, r.stdout, r.stderr)
			}
			if s == fakecore {
				lg := fakeLog(t, log)
				// The constructor's listener and connector reach the core;
				// main's socket, closed unused, never does (unseen).
				if len(events(lg, "init")) != 1 || len(events(lg, "accept")) != 1 || len(events(lg, "socket")) != 2 {
					t.Errorf("the constructor's sockets did not reach the core:\n%s", lg)
				}
			}
		})
	}
}

// TestGoHost: a Go program (cgo, hence dynamically linked and subject to
// LD_PRELOAD) runs unharmed and never gets the core, whether it carries a
// Go build-ID note or not (-buildid= leaves only the cgo symbols).
func TestGoHost(t *testing.T) {
	b := artefacts(t)
	goTool := need(t, "go")
	for _, variant := range []string{"note", "nobuildid"} {
		t.Run(variant, func(t *testing.T) {
			exe := filepath.Join(b.dir, "gohost-"+variant)
			args := []string{"build", "-o", exe}
			if variant == "nobuildid" {
				args = append(args, "-ldflags=-buildid=")
			}
			cmd := exec.Command(goTool, append(args, "./testdata/gohost")...)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go build: %v\n%s", err, out)
			}
			log := filepath.Join(t.TempDir(), "fake.log")
			r := runProg(t, b.env(fakecore, log, "SDPSHIM_LOG_LEVEL=info"), exe)
			if r.err != nil || strings.TrimSpace(r.stdout) != "gohost ok" {
				t.Fatalf("gohost: %v\n%s%s", r.err, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stderr, "a Go runtime is already in this process") {
				t.Errorf("no Go-host log line: %q", r.stderr)
			}
			if lg := fakeLog(t, log); lg != "" {
				t.Errorf("the core was loaded into a Go program:\n%s", lg)
			}
		})
	}
}
