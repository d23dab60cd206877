package tests

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
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

// coreLayers places every package under core/ in a layer (core/doc.go).
// A core package may import only core packages of lower layers, so the
// imports run one way, down; nothing imports the core root, which holds
// only the map. A new package under core/ must be given a layer here.
var coreLayers = map[string]int{
	"sharedmem":     0, // atomic access to memory another process writes
	"fdhook":        0, // reporting the descriptors the core holds
	"direct":        0, // the direct path's handle over the C protocol
	"sockdiag":      0, // a local TCP connection's other end
	"random":        0, // random bytes from the kernel
	"verbs":         1, // the provider contract
	"wait":          1, // Doorbell, WaitPolicy, Waiter, ParkFD
	"wire":          2, // block header, control records, Transport, FlowController
	"shm":           3, // provider
	"rdma":          3, // provider
	"coretest":      3, // provider conformance suite
	"setup":         3, // hello exchange and Link
	"rendezvous":    3, // same-host negotiation
	"doorbell":      4, // Bells over a Link
	"statusbyte":    5, // transport
	"slidingwindow": 5, // transport
	"mux":           6, // Channel and Stream
}

// coreAllowed maps a package outside core/ to the only core packages it
// may import: flow control plugs in through wire.FlowController alone.
var coreAllowed = map[string][]string{
	module + "/flowcontrol": {module + "/core/wire"},
}

type listedPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
	CgoFiles   []string
}

func listPackages(t *testing.T) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps,CgoFiles", "./...")
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

// coreLayer returns the layer of a package under core/ (the first path
// element below core names it), or ok=false for the root and for paths
// outside core/.
func coreLayer(t *testing.T, path string) (name string, layer int, ok bool) {
	rest, under := strings.CutPrefix(path, module+"/core/")
	if !under {
		return "", 0, false
	}
	name, _, _ = strings.Cut(rest, "/")
	layer, known := coreLayers[name]
	if !known {
		t.Errorf("%s is in no layer: give core/%s one in coreLayers (and core/doc.go)", path, name)
		return name, 0, false
	}
	return name, layer, true
}

func TestCoreLayersRunOneWay(t *testing.T) {
	for _, p := range listPackages(t) {
		from, fromLayer, fromCore := coreLayer(t, p.ImportPath)
		for _, imp := range p.Imports {
			if imp == module+"/core" {
				t.Errorf("%s imports the core root, which holds only the layer map", p.ImportPath)
				continue
			}
			to, toLayer, toCore := coreLayer(t, imp)
			if !toCore {
				continue
			}
			if fromCore && from != to && toLayer >= fromLayer {
				t.Errorf("%s (layer %d) imports %s (layer %d): a core package imports only lower layers", p.ImportPath, fromLayer, imp, toLayer)
			}
			for owner, allowed := range coreAllowed {
				if within(p.ImportPath, owner) && !slices.Contains(allowed, imp) {
					t.Errorf("%s imports %s: %s may import only %v of the core", p.ImportPath, imp, owner, allowed)
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
