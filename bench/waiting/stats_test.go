package waiting

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/shim/config"
)

func TestPercentileAndMedian(t *testing.T) {
	var s []int64
	for i := int64(1); i <= 100; i++ {
		s = append(s, i)
	}
	for _, tc := range []struct {
		q    float64
		want int64
	}{{0.5, 50}, {0.99, 99}, {1, 100}, {0, 1}, {0.001, 1}} {
		if got := percentile(s, tc.q); got != tc.want {
			t.Errorf("percentile(1..100, %v) = %d, want %d", tc.q, got, tc.want)
		}
	}
	if percentile(nil, 0.5) != 0 || percentile([]int64{7}, 0.99) != 7 {
		t.Error("percentile of an empty or one-element sample")
	}
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.xs); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	run := func(latUS []int64, cpuMS int64, sleeps, rings, switches uint64) measurement {
		m := measurement{Msgs: len(latUS), Wall: time.Second,
			Both: sample{CPU: cpuMS * 1e6, Sleeps: sleeps, Rings: rings, Switches: switches}}
		for _, l := range latUS {
			m.Lat = append(m.Lat, l*1000)
		}
		return m
	}
	// Three repeats of four requests: the median of each figure.
	c := summarize("adaptive", "tidal", []measurement{
		run([]int64{1, 2, 3, 4}, 4, 0, 0, 2),
		run([]int64{3, 1, 9, 2}, 8, 2, 4, 6),
		run([]int64{5, 5, 5, 5}, 40, 4, 8, 4),
	})
	want := Cell{Mode: "adaptive", Shape: "tidal", Rate: 4, P50: 2, P99: 5, CPUPerMsg: 2000, CPUPercent: 0.8,
		SleepsPerMsg: 0.5, RingsPerMsg: 1, Switches: 4}
	if runs := c.Runs; len(runs.P50) != 3 || runs.P50[2] != 5 {
		t.Errorf("summarize kept the repeats' p50 as %v, want 3 of them, the last 5", runs.P50)
	}
	c.Runs = CellRuns{}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("summarize = %+v\n       want %+v", c, want)
	}
	ic := summarizeIdle("event", []measurement{{Wall: 2 * time.Second, Both: sample{CPU: 10e6, Sleeps: 3}}})
	if ic.Seconds != 2 || math.Abs(ic.CPUPercent-0.5) > 1e-12 || ic.Sleeps != 3 {
		t.Errorf("summarizeIdle = %+v, want 2 s, 0.5%%, 3 wakeups", ic)
	}
}

func TestTargets(t *testing.T) {
	cells := []Cell{
		{Mode: "busy", Shape: "tidal", P50: 2, CPUPerMsg: 10},
		{Mode: "adaptive", Shape: "tidal", P50: 3, CPUPerMsg: 3},
		{Mode: "hybrid", Shape: "intermittent", SleepsPerMsg: 1},
		{Mode: "adaptive", Shape: "intermittent", SleepsPerMsg: 0.2},
	}
	idle := []IdleCell{{Mode: "busy", CPUPercent: 200}, {Mode: "adaptive", CPUPercent: 0.4, Seconds: 10}}
	got := Targets(cells, idle)
	if len(got) != 4 {
		t.Fatalf("%d targets, want 4", len(got))
	}
	for i, want := range []bool{true, true, true, true} {
		if !got[i].Known || got[i].Met != want {
			t.Errorf("target %q: known %v met %v, want met %v (%s)", got[i].Name, got[i].Known, got[i].Met, want, got[i].Detail)
		}
	}
	cells[1].P50, cells[1].CPUPerMsg, cells[3].SleepsPerMsg = 3.1, 3.1, 1
	idle[1].CPUPercent = 1
	for i, tg := range Targets(cells, idle) {
		if !tg.Known || tg.Met {
			t.Errorf("target %d %q: met with %s", i, tg.Name, tg.Detail)
		}
	}
	for _, tg := range Targets(nil, nil) {
		if tg.Known || tg.Met {
			t.Errorf("target %q judged without figures", tg.Name)
		}
	}
}

func TestWriteTable(t *testing.T) {
	var buf bytes.Buffer
	cells := []Cell{
		{Mode: "busy", Shape: "tidal", Rate: 1000, P50: 1, P99: 2, CPUPerMsg: 10},
		{Mode: "adaptive", Shape: "tidal", Rate: 900, P50: 1.2, P99: 3, CPUPerMsg: 2, SleepsPerMsg: 0.01},
	}
	WriteTable(&buf, cells, []IdleCell{{Mode: "adaptive", Seconds: 10, CPUPercent: 0.05}}, 3, time.Second)
	out := buf.String()
	for _, want := range []string{
		"median of 3 run(s) of 1s", "p50 us", "tidal      busy", "tidal  adaptive", "1.20",
		"tidal: adaptive p50 <= 1.5x busy:", "met      1.20 us vs 1.00 us (1.20x)",
		"tidal: adaptive CPU/msg <= 30% of busy:", "(20%)",
		"intermittent: adaptive sleeps/msg < hybrid:  not measured",
		"idle: adaptive CPU < 1%:", "0.050% of a core over 10.0 s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestPacer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(us int) time.Time { return t0.Add(time.Duration(us) * time.Microsecond) }
	low, _ := ShapeByName("steady-low")
	p := newPacer(low, t0, 1)
	if got := p.next(at(0), at(30)); !got.Equal(at(1000)) {
		t.Errorf("steady-low: next at %v, want 1000 us after the last send", got.Sub(t0))
	}
	if got := p.next(at(1000), at(2500)); !got.Equal(at(2500)) {
		t.Errorf("steady-low behind: next at %v, want at once", got.Sub(t0))
	}
	tidal, _ := ShapeByName("tidal")
	p = newPacer(tidal, t0, 1)
	if got := p.next(at(0), at(9000)); !got.Equal(at(9000)) {
		t.Errorf("tidal, within the tide: next at %v, want at once", got.Sub(t0))
	}
	if got := p.next(at(0), at(10_500)); !got.Equal(at(100_000)) {
		t.Errorf("tidal, after the tide: next at %v, want the next cycle", got.Sub(t0))
	}
	inter, _ := ShapeByName("intermittent")
	p = newPacer(inter, t0, 1)
	for train := range 50 {
		for i := 1; i < inter.Train; i++ {
			if got := p.next(at(0), at(100)); !got.Equal(at(150)) {
				t.Fatalf("train %d request %d: next at %v, want 50 us after the reply", train, i, got.Sub(at(100)))
			}
		}
		gap := p.next(at(0), at(100)).Sub(at(100))
		if gap < inter.GapMin || gap >= inter.GapMax {
			t.Fatalf("train %d: gap %v outside [%v, %v)", train, gap, inter.GapMin, inter.GapMax)
		}
	}
	high, _ := ShapeByName("steady-high")
	if got := newPacer(high, t0, 1).next(at(0), at(7)); !got.Equal(at(7)) {
		t.Errorf("steady-high: next at %v, want at once", got.Sub(t0))
	}
	if _, ok := ShapeByName("nope"); ok {
		t.Error("ShapeByName found an unknown shape")
	}
}

// The benchmark's policies use core's defaults; the shim's come from its
// knobs. They must be the same numbers.
func TestPollDefaultsMatchShim(t *testing.T) {
	c, err := config.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	d := wait.DefaultPollParams()
	shim := wait.PollParams{Min: c.PollMin, Max: c.PollMax, Alpha: c.PollAlpha, Beta: c.PollBeta,
		Delta: c.PollDelta, Period: c.PollPeriod, Spin: c.PollSpin}
	if shim != d {
		t.Errorf("SDPSHIM_POLL_* defaults %+v, wait.DefaultPollParams %+v", shim, d)
	}
}

// A short real run across two processes: a polling peer takes no rings
// on either side, an event-mode one sleeps on every wait.
func TestMeasureRings(t *testing.T) {
	high, _ := ShapeByName("steady-high")
	for _, tc := range []struct {
		mode  string
		rings bool
	}{{wait.WaitModeBusy, false}, {wait.WaitModeEvent, true}} {
		m, err := measure(tc.mode, high, 150*time.Millisecond, 1)
		if err != nil {
			t.Fatalf("%s: %v", tc.mode, err)
		}
		b := m.Both
		if m.Msgs < 10 || len(m.Lat) != m.Msgs || b.CPU <= 0 || b.Waits < uint64(m.Msgs) {
			t.Errorf("%s: %d requests, %d latencies, %+v", tc.mode, m.Msgs, len(m.Lat), b)
		}
		if got := b.Rings > 0 && b.Sleeps > 0; got != tc.rings {
			t.Errorf("%s: %d rings, %d sleeps for %d requests", tc.mode, b.Rings, b.Sleeps, m.Msgs)
		}
		if !tc.rings && (b.Rings != 0 || b.Sleeps != 0) {
			t.Errorf("%s: %d rings, %d sleeps: a polling peer must take none", tc.mode, b.Rings, b.Sleeps)
		}
	}
}
