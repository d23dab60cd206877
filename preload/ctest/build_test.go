package ctest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// built holds the artefacts every test shares, built once.
type built struct {
	dir      string // temporary directory holding everything below
	lib      string // libsdpshim.so
	fakecore string // testdata/fakecore.c as a core library
	echo     string
	misc     string
	bench    string
	wrap     string // testdata/wrapbench.c linked with the library's sources
	ctormain string
}

var (
	buildOnce sync.Once
	buildRes  built
	buildErr  error
	tmpRoot   string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if tmpRoot != "" {
		os.RemoveAll(tmpRoot)
	}
	os.Exit(code)
}

// need skips the test when tool is missing, or fails it in CI.
func need(t *testing.T, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required in CI: %v", tool, err)
		}
		t.Skipf("%s not installed: %v", tool, err)
	}
	return p
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// artefacts builds the library and the test programs (once per run).
func artefacts(t *testing.T) built {
	t.Helper()
	need(t, "gcc")
	if runtime.GOOS != "linux" {
		t.Skip("libsdpshim is Linux-only")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sdpshim-ctest-")
		if err != nil {
			buildErr = err
			return
		}
		tmpRoot = dir
		b := built{
			dir:      dir,
			lib:      filepath.Join(dir, "lib", "libsdpshim.so"),
			fakecore: filepath.Join(dir, "fakecore.so"),
			echo:     filepath.Join(dir, "echo"),
			misc:     filepath.Join(dir, "misc"),
			bench:    filepath.Join(dir, "bench"),
			wrap:     filepath.Join(dir, "wrapbench"),
			ctormain: filepath.Join(dir, "ctormain"),
		}
		os.MkdirAll(filepath.Dir(b.lib), 0o755)
		fortify := []string{"-O2", "-D_FORTIFY_SOURCE=2", "-Wall", "-Wextra", "-Werror"}
		steps := [][]string{
			{"sh", "../c/build.sh", b.lib, "-Werror"},
			append([]string{"gcc", "-shared", "-fPIC", "-I../c", "-o", b.fakecore, "testdata/fakecore.c"}, fortify...),
			append([]string{"gcc", "-pthread", "-o", b.echo, "testdata/echo.c"}, fortify...),
			append([]string{"gcc", "-o", b.misc, "testdata/misc.c"}, fortify...),
			{"gcc", "-O2", "-Wall", "-Werror", "-o", b.bench, "testdata/bench.c", "-ldl"},
			append(append([]string{"gcc", "-O2", "-Wall", "-Werror", "-D_GNU_SOURCE", "-I../c", "-o", b.wrap, "testdata/wrapbench.c"},
				librarySources()...), "-ldl"),
			{"gcc", "-O2", "-Wall", "-Werror", "-shared", "-fPIC", "-o", filepath.Join(dir, "libctorlib.so"), "testdata/ctorlib.c"},
			{"gcc", "-O2", "-Wall", "-Werror", "-o", b.ctormain, "testdata/ctormain.c", "-L" + dir, "-lctorlib", "-Wl,-rpath," + dir},
		}
		for _, s := range steps {
			if err := run(s[0], s[1:]...); err != nil {
				buildErr = err
				return
			}
		}
		buildRes = b
	})
	if buildErr != nil {
		t.Fatalf("build: %v", buildErr)
	}
	return buildRes
}

// librarySources lists preload/c's C and assembly sources.
func librarySources() []string {
	c, _ := filepath.Glob("../c/*.c")
	s, _ := filepath.Glob("../c/*.S")
	return append(c, s...)
}

// setup is how a program runs: without the library, with it alone, or with
// the fake core.
type setup string

const (
	plain       setup = "plain"
	passthrough setup = "passthrough"
	fakecore    setup = "fakecore"
	// realcore loads the core named by SDPSHIM_CTEST_CORE (an absolute
	// path, e.g. build/libsdpshim-core.so), with the same programs and
	// byte checks as the other set-ups (the fake core's event checks do
	// not apply).
	realcore setup = "realcore"
)

var setups = func() []setup {
	s := []setup{plain, passthrough, fakecore}
	if os.Getenv("SDPSHIM_CTEST_CORE") != "" {
		s = append(s, realcore)
	}
	return s
}()

// env returns the environment for s; log is the fake core's event log.
func (b built) env(s setup, log string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LD_PRELOAD=") && !strings.HasPrefix(kv, "SDPSHIM_CORE=") &&
			!strings.HasPrefix(kv, "SDPSHIM_ENABLE=") && !strings.HasPrefix(kv, "SDPSHIM_LOG_") &&
			!strings.HasPrefix(kv, "FAKECORE_") {
			env = append(env, kv)
		}
	}
	switch s {
	case passthrough:
		// No libsdpshim-core.so beside the library: nothing to load.
		env = append(env, "LD_PRELOAD="+b.lib)
	case fakecore:
		env = append(env, "LD_PRELOAD="+b.lib, "SDPSHIM_CORE="+b.fakecore, "FAKECORE_LOG="+log)
	case realcore:
		env = append(env, "LD_PRELOAD="+b.lib, "SDPSHIM_CORE="+os.Getenv("SDPSHIM_CTEST_CORE"))
	}
	return append(env, extra...)
}

type result struct {
	stdout, stderr string
	err            error
}

// runProg runs a program to completion (at most 60 s).
func runProg(t *testing.T, env []string, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out: %w", ctx.Err())
	}
	return result{out.String(), errb.String(), err}
}

// fakeLog reads the fake core's event log ("" when it never wrote one).
func fakeLog(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// events returns the lines of log whose event (second field) is name.
func events(log, name string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[1] == name {
			out = append(out, line)
		}
	}
	return out
}
