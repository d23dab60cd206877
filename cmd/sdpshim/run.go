package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/shim/config"
)

func init() {
	register(&Command{
		Name:    "run",
		Summary: "run a program with sdpshim preloaded",
		Usage:   "sdpshim run [--env NAME=VALUE]... [--lib PATH] -- PROGRAM [ARGS...]",
		Help: `Starts PROGRAM with the interposer in LD_PRELOAD (in front of any
LD_PRELOAD already set) and the given environment additions. Both ends
of a connection must run under the shim for it to be accelerated.

  --env NAME=VALUE  set a variable for the program (repeatable); SDPSHIM_*
                    values are checked first and problems printed: the
                    shim would disable itself and the program would run
                    on plain TCP
  --lib PATH        the interposer to preload (default: libsdpshim.so
                    beside this executable)

Exit status: PROGRAM's own (sdpshim replaces itself with it), 127 when
PROGRAM is not found, 2 on a usage error.`,
		Run: runRun,
	})
}

// envList collects repeated --env flags.
type envList []string

func (e *envList) String() string { return strings.Join(*e, " ") }

func (e *envList) Set(v string) error {
	name, _, ok := strings.Cut(v, "=")
	if !ok || name == "" || strings.ContainsAny(name, " \t\n") {
		return fmt.Errorf("expected NAME=VALUE, got %q", v)
	}
	*e = append(*e, v)
	return nil
}

// runRun implements `sdpshim run`.
func runRun(env *Env, args []string) int {
	cmd := commands["run"]
	fs := cmd.flags(env)
	var extra envList
	fs.Var(&extra, "env", "NAME=VALUE to set for the program (repeatable)")
	lib := fs.String("lib", "", "path of libsdpshim.so")
	if code, done := parse(fs, args); done {
		return code
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintln(env.Stderr, "sdpshim run: no program given")
		cmd.printUsage(env.Stderr)
		return exitUsage
	}
	path, err := preloadPath(*lib)
	if err != nil {
		fmt.Fprintf(env.Stderr, "sdpshim run: %v\n", err)
		return exitUsage
	}
	environ := withPreload(mergeEnv(env.Environ, extra), path)
	if _, err := config.Load(environ); err != nil {
		for _, line := range strings.Split(strings.TrimSpace(err.Error()), "\n") {
			fmt.Fprintf(env.Stderr, "sdpshim run: warning: %s\n", line)
		}
	}
	prog, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintf(env.Stderr, "sdpshim run: %v\n", err)
		return 127
	}
	err = unix.Exec(prog, argv, environ)
	fmt.Fprintf(env.Stderr, "sdpshim run: exec %s: %v\n", prog, err)
	return 127
}

// preloadPath returns the absolute path of the interposer: flag, else
// libsdpshim.so beside this executable. It must exist.
func preloadPath(flagValue string) (string, error) {
	p := flagValue
	if p == "" {
		self, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("cannot find own executable to locate libsdpshim.so (use --lib): %w", err)
		}
		p = filepath.Join(filepath.Dir(self), "libsdpshim.so")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("interposer %s: %w (build it with make, or pass --lib)", abs, err)
	} else if !st.Mode().IsRegular() {
		return "", fmt.Errorf("interposer %s is not a regular file", abs)
	}
	if strings.ContainsAny(abs, " :") {
		return "", fmt.Errorf("interposer path %q contains a space or colon, which LD_PRELOAD cannot carry", abs)
	}
	return abs, nil
}

// mergeEnv returns environ with each NAME=VALUE of extra replacing any
// earlier setting of NAME.
func mergeEnv(environ, extra []string) []string {
	out := make([]string, 0, len(environ)+len(extra))
	drop := map[string]bool{}
	for _, kv := range extra {
		name, _, _ := strings.Cut(kv, "=")
		drop[name] = true
	}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !drop[name] {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// withPreload puts lib first in LD_PRELOAD, keeping what was there and
// not adding it twice.
func withPreload(environ []string, lib string) []string {
	out := make([]string, 0, len(environ)+1)
	var existing []string
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "LD_PRELOAD="); ok {
			for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ':' }) {
				if f != lib {
					existing = append(existing, f)
				}
			}
			continue
		}
		out = append(out, kv)
	}
	return append(out, "LD_PRELOAD="+strings.Join(append([]string{lib}, existing...), " "))
}
