// Package cbuild compiles the C programs that the benchmark sections
// embed: each section runs plain sockets programs under the preload
// (a Go program cannot be preloaded), so it carries their sources and
// builds them with the machine's gcc when it runs.
package cbuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Build writes files (relative path -> text: the program's source and
// the headers it includes, where its #include lines expect them) under
// dir, compiles the one named main with gcc -O2 -Wall and flags, and
// returns the program's path: dir/main without its ".c", beside it.
func Build(dir, main string, files map[string][]byte, flags ...string) (string, error) {
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(path, text, 0o644); err != nil {
			return "", err
		}
	}
	src := filepath.Join(dir, main)
	prog := strings.TrimSuffix(src, ".c")
	args := append([]string{"-O2", "-Wall", "-o", prog, src}, flags...)
	if msg, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("gcc %s: %v\n%s", filepath.Base(main), err, msg)
	}
	return prog, nil
}
