package seed000

import (
	"math"
	"strings"
	"testing"
	"time"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestQuantile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	for _, c := range []struct{ q, want float64 }{{0, 1}, {0.2, 1}, {0.5, 3}, {0.9, 5}, {1, 5}} {
		if got := quantile(xs, c.q); got != c.want {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if xs[0] != 5 {
		t.Error("quantile sorted its argument")
	}
	if median(nil) != 0 || median([]float64{7}) != 7 || median([]float64{1, 2, 3, 4}) != 2 {
		t.Error("median of edge cases")
	}
}

func TestMeanStdCV(t *testing.T) {
	m, s := meanStd([]float64{2, 4, 4, 4, 5, 5, 7, 9})
	if !near(m, 5) || !near(s, 2) {
		t.Errorf("meanStd = %v, %v; want 5, 2", m, s)
	}
	if !near(cv([]float64{2, 4, 4, 4, 5, 5, 7, 9}), 0.4) {
		t.Error("cv")
	}
	if cv([]float64{0, 0}) != 0 || cv(nil) != 0 {
		t.Error("cv of zero mean")
	}
	if cv([]float64{276, 276, 276}) != 0 {
		t.Error("cv of a constant")
	}
}

func TestBins(t *testing.T) {
	bins := make([]int64, 3)
	bin := int64(10 * time.Millisecond)
	binAdd(bins, 0, bin, 1)
	binAdd(bins, bin-1, bin, 2)
	binAdd(bins, bin, bin, 4)
	binAdd(bins, 3*bin, bin, 8) // past the end
	binAdd(bins, -1, bin, 16)   // before the start
	if bins[0] != 3 || bins[1] != 4 || bins[2] != 0 {
		t.Errorf("bins %v", bins)
	}
	r := binRates([]int64{1e6, 0}, 10*time.Millisecond)
	if !near(r[0], 100) || r[1] != 0 {
		t.Errorf("rates %v, want 100 MB/s and 0", r)
	}
}

func TestPhaseAndRuns(t *testing.T) {
	r := RetainResult{Rates: make([]float64, 30)}
	for i := range r.Rates {
		r.Rates[i] = 100
		if i >= 10 && i < 20 {
			r.Rates[i] = 88
		}
	}
	if got := r.Phase(retainFrom, retainTo); !near(got, 88) {
		t.Errorf("held phase %v", got)
	}
	if got := r.Phase(0, retainFrom); !near(got, 100) {
		t.Errorf("first phase %v", got)
	}
	if r.Phase(time.Second, 2*time.Second) != 0 {
		t.Error("phase past the end")
	}
	flat := RetainResult{Rates: make([]float64, 30)}
	for i := range flat.Rates {
		flat.Rates[i] = 100
	}
	stall := RetainResult{Rates: make([]float64, 30)}
	for i := 0; i < 10; i++ {
		stall.Rates[i] = 100
	}
	if got := medianBy([]RetainResult{stall, r, flat}, RetainResult.heldRatio); !near(got.heldRatio(), 0.88) {
		t.Errorf("median timeline held ratio %v, want 0.88", got.heldRatio())
	}
	if got := joinF([]float64{0.876, 1}, 2); got != "0.88 1.00" {
		t.Errorf("joinF %q", got)
	}
	runs := []ThroughputResult{
		{Bytes: 3e6, Elapsed: time.Second}, {Bytes: 1e6, Elapsed: time.Second}, {Bytes: 2e6, Elapsed: time.Second},
	}
	if got := medianBy(runs, ThroughputResult.MBps); got.Bytes != 2e6 {
		t.Errorf("median run %+v", got)
	}
	x := ThroughputResult{Bytes: 2 << 20, SenderCPU: 2 * time.Millisecond, ReceiverCPU: time.Millisecond, Elapsed: time.Second}
	if s, rc := x.CPUPerMiB(); !near(s, 1000) || !near(rc, 500) {
		t.Errorf("cpu per MiB %v %v", s, rc)
	}
}

func TestTable(t *testing.T) {
	tb := newTable("Title", "size", "a", "bb")
	tb.row("64B", f(1.234, 1), f(-1, 1))
	tb.row("8MiB", f(100, 0), "x")
	tb.note("note %d", 1)
	var b strings.Builder
	tb.write(&b)
	want := "Title\n" +
		"size    a  bb\n" +
		"64B   1.2   -\n" +
		"8MiB  100   x\n" +
		"  note 1\n\n"
	if b.String() != want {
		t.Errorf("table:\n%q\nwant\n%q", b.String(), want)
	}
	for n, want := range map[int]string{64: "64B", 1 << 10: "1KiB", 64 << 10: "64KiB", 8 << 20: "8MiB", 1500: "1500B"} {
		if got := sizeName(n); got != want {
			t.Errorf("sizeName(%d) = %q, want %q", n, got, want)
		}
	}
	if times(4.56) != "4.6x" || times(-1) != "-" {
		t.Error("times")
	}
	if verdict(true) != "met" || verdict(false) != "NOT met" {
		t.Error("verdict")
	}
}

func TestPlans(t *testing.T) {
	q, full := planFor(true), planFor(false)
	if q.cameraDuration >= full.cameraDuration || q.syncIters >= full.syncIters || q.thrRepeats > full.thrRepeats {
		t.Errorf("quick plan %+v not smaller than %+v", q, full)
	}
}
