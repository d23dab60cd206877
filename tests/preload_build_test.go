package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Artefacts of the preload tests: the two libraries and the C programs
// they run. With SDPSHIM_BUILD set (make integration) the libraries come
// from that directory; otherwise they are built here, once per test run,
// with the same commands as the Makefile.

type artefacts struct {
	lib      string // libsdpshim.so, with libsdpshim-core.so beside it
	pingpong string
	stream   string
	selfpair string
	echo     string // preload/ctest/testdata/echo.c: event-loop echo server and client
}

var (
	buildOnce sync.Once
	built     artefacts
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// need returns the path of tool, or skips the test (fails it in CI).
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

func build(t *testing.T) artefacts {
	t.Helper()
	need(t, "gcc")
	buildOnce.Do(func() { built, buildErr = buildArtefacts() })
	if buildErr != nil {
		t.Fatalf("build: %v", buildErr)
	}
	return built
}

func buildArtefacts() (artefacts, error) {
	dir, err := os.MkdirTemp("", "sdpshim-tests-")
	if err != nil {
		return artefacts{}, err
	}
	// Programs of other uids load the library from here (the pods'
	// processes, postgres): MkdirTemp's 0700 would keep it from them,
	// and they would run unshimmed without a word.
	if err := os.Chmod(dir, 0o755); err != nil {
		return artefacts{}, err
	}
	buildDir = dir
	a := artefacts{
		lib:      filepath.Join(dir, "libsdpshim.so"),
		pingpong: filepath.Join(dir, "pingpong"),
		stream:   filepath.Join(dir, "stream"),
		selfpair: filepath.Join(dir, "selfpair"),
		echo:     filepath.Join(dir, "echo"),
	}
	var steps [][]string
	if b := os.Getenv("SDPSHIM_BUILD"); b != "" {
		a.lib = filepath.Join(b, "libsdpshim.so")
	} else {
		root, _ := filepath.Abs("..")
		godebug, err := coreGodebug()
		if err != nil {
			return a, err
		}
		steps = append(steps,
			[]string{"sh", "../preload/c/build.sh", a.lib},
			[]string{"go", "build", "-buildmode=c-shared", "-trimpath",
				"-ldflags=-X=runtime.godebugDefault=" + godebug +
					" -extldflags=-Wl,--version-script=" + filepath.Join(root, "preload/entry/exports.map"),
				"-o", filepath.Join(dir, "libsdpshim-core.so"), "../preload/entry"})
	}
	steps = append(steps,
		[]string{"gcc", "-O2", "-Wall", "-o", a.pingpong, "../demo/pingpong.c"},
		[]string{"gcc", "-O2", "-Wall", "-o", a.stream, "../demo/stream.c"},
		[]string{"gcc", "-O2", "-Wall", "-pthread", "-o", a.selfpair, "testdata/selfpair.c"},
		[]string{"gcc", "-O2", "-D_FORTIFY_SOURCE=2", "-Wall", "-pthread", "-o", a.echo, "../preload/ctest/testdata/echo.c"})
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return a, fmt.Errorf("%s: %v\n%s", strings.Join(s, " "), err, out)
		}
	}
	return a, nil
}

// coreGodebug returns the core's GODEBUG default as the Makefile builds
// it from preload/entry/godebug.conf: the lines that are not comments,
// joined with commas.
func coreGodebug() (string, error) {
	b, err := os.ReadFile("../preload/entry/godebug.conf")
	if err != nil {
		return "", err
	}
	var kept []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, ","), nil
}
