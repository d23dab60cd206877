package tests

import (
	"bytes"
	"debug/elf"
	"path/filepath"
	"runtime"
	"testing"
)

// Both libraries export their probe functions, and each begins with one
// 5-byte NOP (x86-64) or a NOP (arm64) followed by a return, so a uprobe
// costs nothing until attached and the call costs a call and a return.
func TestStatsProbeFunctionsStartWithNOP(t *testing.T) {
	a := build(t)
	var want []byte
	switch runtime.GOARCH {
	case "amd64":
		want = []byte{0x0f, 0x1f, 0x44, 0x00, 0x00, 0xc3} // nopl 0x0(%rax,%rax,1); ret
	case "arm64":
		want = []byte{0x1f, 0x20, 0x03, 0xd5, 0xc0, 0x03, 0x5f, 0xd6} // nop; ret
	default:
		t.Skipf("probes exist on amd64 and arm64 only, not %s", runtime.GOARCH)
	}
	for lib, syms := range map[string][]string{
		a.lib: {"sdpshim_probe_fallback"},
		filepath.Join(filepath.Dir(a.lib), "libsdpshim-core.so"): {"sdpshim_probe_fallback", "sdpshim_probe_accelerated"},
	} {
		f, err := elf.Open(lib)
		if err != nil {
			t.Fatal(err)
		}
		dyn, err := f.DynamicSymbols()
		if err != nil {
			t.Fatalf("%s: %v", lib, err)
		}
		for _, name := range syms {
			var sym *elf.Symbol
			for i := range dyn {
				if dyn[i].Name == name && dyn[i].Section != elf.SHN_UNDEF {
					sym = &dyn[i]
				}
			}
			if sym == nil {
				t.Errorf("%s does not export %s", filepath.Base(lib), name)
				continue
			}
			if elf.ST_TYPE(sym.Info) != elf.STT_FUNC || sym.Size != uint64(len(want)) {
				t.Errorf("%s: %s is type %v size %d, want a function of %d bytes", filepath.Base(lib), name, elf.ST_TYPE(sym.Info), sym.Size, len(want))
			}
			sec := f.Sections[sym.Section]
			code := make([]byte, len(want))
			if _, err := sec.ReadAt(code, int64(sym.Value-sec.Addr)); err != nil {
				t.Fatalf("%s: read %s: %v", lib, name, err)
			}
			if !bytes.Equal(code, want) {
				t.Errorf("%s: %s starts % x, want % x", filepath.Base(lib), name, code, want)
			}
		}
		f.Close()
	}
}
