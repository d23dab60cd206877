package plots

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/bench/results"
)

// TestDrawKinds draws one plot of each kind from constructed figures
// and checks that each file decodes as a PNG of the expected size; a
// plot whose group has no figures is skipped.
func TestDrawKinds(t *testing.T) {
	rec := results.NewRecorder("s")
	for _, size := range []float64{256, 4096, 65536} {
		rec.Add(results.Figure{Name: "line", Group: "lines", Series: "a", X: size,
			Shim: results.Of([]float64{size / 2, size, size * 2}, size), Paper: results.Paper(size * 3)})
		rec.Add(results.Figure{Name: "line b", Group: "lines", Series: "b", X: size, Shim: results.One(size / 4)})
	}
	for _, c := range []string{"x", "y"} {
		rec.Add(results.Figure{Name: "bar", Group: "bars", Series: "m1", Category: c, Shim: results.One(2)})
		rec.Add(results.Figure{Name: "bar", Group: "bars", Series: "m2", Category: c, Shim: results.One(3)})
		rec.Add(results.Figure{Name: "ratio", Group: "ratio", Category: "program " + c, Higher: true,
			Kernel: results.One(10), Shim: results.One(25)})
	}
	run := &results.Run{Date: time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC), Machine: results.Machine{Cores: 2}}
	run.Add(results.SectionRun{Name: "s"}, rec)
	plots := []results.Plot{
		{Group: "lines", Title: "lines", XLabel: "bytes", YLabel: "us", LogX: true, LogY: true, XBytes: true},
		{Group: "bars", Title: "bars", XLabel: "shape", YLabel: "us", Kind: results.Bars},
		{Group: "ratio", Title: "ratio", XLabel: "x", Kind: results.RatioBars},
		{Group: "empty", Title: "nothing measured"},
	}
	dir := t.TempDir()
	files, err := Save(run, map[string][]results.Plot{"s": plots}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Fatalf("files %v, want 3", files)
	}
	for _, name := range []string{"s-lines.png", "s-bars.png", "s-ratio.png"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b := img.Bounds(); b.Dx() != 576 || b.Dy() != 384 {
			t.Errorf("%s: %d x %d, want 576 x 384", name, b.Dx(), b.Dy())
		}
	}
}

func TestByteLabel(t *testing.T) {
	for n, want := range map[float64]string{64: "64", 1024: "1K", 65507: "65507", 8 << 20: "8M", 1536: "1536"} {
		if got := byteLabel(n); got != want {
			t.Errorf("byteLabel(%v) = %q, want %q", n, got, want)
		}
	}
}
