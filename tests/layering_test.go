package tests

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/sdpshim/sdpshim"

// forbidden maps a package prefix to the prefixes it must never depend on,
// directly or through another package (docs/design.md, "Packages and
// layering").
var forbidden = map[string][]string{
	module + "/core":        {module + "/shim", module + "/flowcontrol", module + "/preload"},
	module + "/flowcontrol": {module + "/shim", module + "/preload"},
	module + "/shim":        {module + "/preload"},
}

// cgoAllowed lists the only packages that may import "C": the interposer's
// Go side, the RDMA provider, and the direct path's handle, which compiles
// the interposer's C protocol source (one implementation of it).
var cgoAllowed = []string{module + "/preload", module + "/core/rdma", module + "/core/direct"}

type listedPackage struct {
	ImportPath string
	Deps       []string
	CgoFiles   []string
}

func listPackages(t *testing.T) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Deps,CgoFiles", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages")
	}
	return pkgs
}

func within(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

func TestLayering(t *testing.T) {
	for _, p := range listPackages(t) {
		for owner, bans := range forbidden {
			if !within(p.ImportPath, owner) {
				continue
			}
			for _, dep := range p.Deps {
				for _, ban := range bans {
					if within(dep, ban) {
						t.Errorf("%s depends on %s: %s must not depend on %s", p.ImportPath, dep, owner, ban)
					}
				}
			}
		}
	}
}

func TestCgoOnlyWhereAllowed(t *testing.T) {
	for _, p := range listPackages(t) {
		if len(p.CgoFiles) == 0 {
			continue
		}
		ok := false
		for _, allowed := range cgoAllowed {
			ok = ok || within(p.ImportPath, allowed)
		}
		if !ok {
			t.Errorf("%s uses cgo (%v); only %v may", p.ImportPath, p.CgoFiles, cgoAllowed)
		}
	}
}
