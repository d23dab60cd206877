package results

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new *Values
		higher   bool
		want     string
	}{
		{"within the range of both", Of([]float64{10, 12, 11}, 11), Of([]float64{11, 13, 12}, 12), true, Noise},
		{"beyond the wider range, higher better", Of([]float64{10, 12, 11}, 11), Of([]float64{15, 16, 15.5}, 15.5), true, Better},
		{"beyond the wider range, lower better", Of([]float64{10, 12, 11}, 11), Of([]float64{15, 16, 15.5}, 15.5), false, Worse},
		{"a fall when lower is better", Of([]float64{20, 21, 22}, 21), Of([]float64{10, 11, 12}, 11), false, Better},
		// The new run's spread (8) covers the change (5) though the
		// old one's (2) does not.
		{"the larger spread decides", Of([]float64{10, 12, 11}, 11), Of([]float64{12, 20, 16}, 16), true, Noise},
		// Five repeats: the interquartile range by nearest rank (10..13,
		// 3), not the full range with its outlier (10..40), is the
		// spread.
		{"IQR from five repeats", Of([]float64{10, 11, 12, 13, 40}, 12), Of([]float64{16, 16, 16, 16, 16}, 16), true, Better},
		{"within the IQR", Of([]float64{10, 11, 12, 13, 40}, 12), Of([]float64{15, 15, 15, 15, 15}, 15), true, Noise},
		{"exactly the spread is noise", Of([]float64{10, 12}, 11), Of([]float64{12, 14}, 13), true, Noise},
		{"tight repeats, a change under 1%", Of([]float64{50, 50}, 50), Of([]float64{49.9, 49.9}, 49.9), true, Noise},
		{"tight repeats, a change over 1%", Of([]float64{50, 50}, 50), Of([]float64{49, 49}, 49), true, Worse},
		{"one repeat", One(10), Of([]float64{30, 31}, 30.5), true, NoRepeat},
		{"missing", nil, One(3), true, Missing},
	} {
		if got := Judge(tc.old, tc.new, tc.higher); got != tc.want {
			t.Errorf("%s: Judge = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestCompare(t *testing.T) {
	rec := NewRecorder("s")
	rec.Add(Figure{Name: "a", Unit: "us", Shim: Of([]float64{10, 11, 12}, 11), Kernel: Of([]float64{20, 21, 22}, 21)})
	rec.Add(Figure{Name: "gone", Unit: "us", Shim: One(1)})
	old := &Run{}
	old.Add(SectionRun{Name: "s"}, rec)
	rec = NewRecorder("s")
	rec.Add(Figure{Name: "new", Unit: "MB/s", Higher: true, Shim: One(5)})
	rec.Add(Figure{Name: "a", Unit: "us", Shim: Of([]float64{5, 6, 5.5}, 5.5), Kernel: Of([]float64{20, 22, 21}, 21)})
	cur := &Run{}
	cur.Add(SectionRun{Name: "s"}, rec)

	got := Compare(old, cur)
	want := []struct {
		name    string
		kernel  bool
		verdict string
	}{{"new", false, Missing}, {"a", false, Better}, {"a", true, Noise}, {"gone", false, Missing}}
	if len(got) != len(want) {
		t.Fatalf("Compare = %+v, want %d changes", got, len(want))
	}
	for i, w := range want {
		if got[i].Name != w.name || got[i].Kernel != w.kernel || got[i].Verdict != w.verdict {
			t.Errorf("change %d = %+v, want %+v", i, got[i], w)
		}
	}
	if p := got[1].Percent; math.Abs(p+50) > 1e-9 {
		t.Errorf("a: %.2f%%, want -50%%", p)
	}
	var buf bytes.Buffer
	if err := WriteChanges(&buf, got); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"a (kernel TCP)", "-50.0%", "better", "noise", "missing"} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, buf.String())
		}
	}
}

func TestAdvantage(t *testing.T) {
	thr := Figure{Higher: true, Kernel: One(100), Shim: One(300)}
	lat := Figure{Kernel: One(30), Shim: One(10)}
	if r, ok := thr.Advantage(); !ok || r != 3 {
		t.Errorf("throughput advantage %v %v, want 3", r, ok)
	}
	if r, ok := lat.Advantage(); !ok || r != 3 {
		t.Errorf("latency advantage %v %v, want 3", r, ok)
	}
	if _, ok := (Figure{Shim: One(1)}).Advantage(); ok {
		t.Error("advantage without kernel figures")
	}
}

// TestRecorderFinite checks that a non-finite value, which JSON cannot
// hold, never reaches a Run.
func TestRecorderFinite(t *testing.T) {
	rec := NewRecorder("s")
	rec.Add(Figure{Name: "nan", Shim: One(math.NaN())})
	rec.Add(Figure{Name: "inf repeat", Shim: Of([]float64{1, math.Inf(1)}, 1)})
	var nilRec *Recorder
	nilRec.Add(Figure{Name: "dropped"})
	r := &Run{}
	r.Add(SectionRun{Name: "s"}, rec)
	if f := r.Figures; len(f) != 2 || f[0].Shim != nil || len(f[1].Shim.Repeats) != 1 || f[0].Section != "s" {
		t.Fatalf("figures %+v", f)
	}
	if err := r.Encode(&bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
}
