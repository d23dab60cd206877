// model_test.go - runs the SPIN model of the direct data path's wait/wake
// protocol (direct.pml): for each configuration, spin -a generates the
// verifier, gcc compiles it, pan searches the whole state space; the
// protocol must verify, and each deliberately broken variant must not.

package model

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// need returns the path of tool, skipping the test when it is missing, or
// failing it in CI, where it is required.
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

// A check is one pan search of one configuration of the model.
type check struct {
	name string
	defs []string // spin -D definitions
	live bool     // the LTL claim with acceptance cycles (pan -a), else safety
	// broken: pan must find an error; want is what it must report.
	broken bool
	want   string
	// reached: for the real protocol, statements that must not be listed
	// as unreached (the sleeps and wakes actually happen).
	reached []string
}

// Statements (as pan lists unreached ones) that show each wait kind at work.
var (
	futexRx = []string{"rx_queued = 1", "rx_queued = 0", "data_word = (data_word+1)"}
	futexTx = []string{"tx_queued = 1", "tx_queued = 0", "space_word = (space_word+1)"}
	eventRx = []string{"data_armed = 1", "rx_efd = 1", "rx_efd = 0"}
	eventTx = []string{"space_armed = 1", "tx_efd = 1", "tx_efd = 0"}
	parkRx  = []string{"parked = 1", "parked = 0", "data_armed = 2", "sock_ring = 0", "rx_efd = 0"}
)

func cat(ls ...[]string) []string {
	var r []string
	for _, l := range ls {
		r = append(r, l...)
	}
	return r
}

func checks() []check {
	type cfg struct {
		name    string
		defs    []string
		reached []string
		live    bool // also the liveness search
	}
	good := []cfg{
		{"futex", nil, cat(futexRx, futexTx), true},
		{"futex-N1", []string{"N=1"}, cat(futexRx, futexTx), true},
		// 1.35M states: its liveness search alone takes ~8 s, so safety only.
		{"futex-M4", []string{"M=4"}, cat(futexRx, futexTx), false},
		{"rx-event", []string{"RX_EVENT=1"}, cat(eventRx, futexTx), true},
		{"tx-event", []string{"TX_EVENT=1"}, cat(futexRx, eventTx), true},
		{"both-event", []string{"RX_EVENT=1", "TX_EVENT=1"}, cat(eventRx, eventTx), true},
		{"rx-epoll-quiet", []string{"RX_EVENT=2"}, cat(eventRx, futexTx, []string{"quiet = 0"}), true},
		{"rx-epoll-quiet-bell", []string{"RX_EVENT=2", "BELL=1"}, cat(eventRx, futexTx), true},
		// Two threads of one set the interposer answers, with parking:
		// 6M states, about 4 s for each search.
		{"rx-epoll-park", []string{"RX_EVENT=3"}, cat(parkRx, futexTx), true},
		// The core's detach at a close, waking only sleepers it counted.
		{"futex-detach", []string{"DETACH=1"}, []string{"rx_queued = 1", "closed = 1", "rx_closed = 1"}, true},
		// Two blocking readers sleeping on one word: the woken flag
		// (one wake per announcement) loses no wakeup.
		{"futex-two-readers", []string{"RX2=1", "ENDS=0"}, cat(futexTx, []string{"rx_wakes = (rx_wakes+1)", "q = 1", "data_woken = 0"}), true},
		// Links to any free block (SDP_DBLK_NEXT): 13M states,
		// about 10 s, so safety only.
		{"futex-link", []string{"WRAP=1", "N=4"}, cat(futexRx, futexTx, []string{"blknext[(tx_next%4)] = j"}), false},
	}
	// Every broken variant must fail the safety search; two (a futex and
	// an event one) also show that the liveness claim catches a lost wakeup.
	bad := []cfg{
		{"broken1-look-before-announce", []string{"BROKEN=1"}, nil, true},
		{"broken2-value-after-recheck", []string{"BROKEN=2"}, nil, false},
		{"broken3-look-before-publish", []string{"BROKEN=3"}, nil, false},
		{"broken4-poll-before-arm", []string{"BROKEN=4", "RX_EVENT=1"}, nil, true},
		{"broken5-space-look-before-announce", []string{"BROKEN=5"}, nil, false},
		{"broken6-ring-keeps-quiet", []string{"BROKEN=6", "RX_EVENT=2"}, nil, true},
		{"broken7-poll-makes-quiet", []string{"BROKEN=7", "RX_EVENT=2"}, nil, false},
		{"broken8-park-marks-last", []string{"BROKEN=8", "RX_EVENT=3"}, nil, false},
		{"broken9-ring-keeps-parked", []string{"BROKEN=9", "RX_EVENT=3"}, nil, false},
		{"broken10-freed-before-cursor", []string{"BROKEN=10", "RX_EVENT=3"}, nil, true},
		{"broken11-sleep-after-detach", []string{"BROKEN=11", "DETACH=1"}, nil, true},
		{"broken12-bell-skips-unarmed", []string{"BROKEN=12", "RX_EVENT=2", "BELL=1"}, nil, false},
		{"broken13-woken-cleared-early", []string{"BROKEN=13", "RX2=1", "ENDS=0"}, nil, true},
		{"broken14-woken-never-cleared", []string{"BROKEN=14"}, nil, false},
		{"broken15-link-ignored", []string{"BROKEN=15", "WRAP=1", "N=4"}, nil, false},
	}
	// What pan must report for a broken variant's safety search: a lost
	// wakeup is a process blocked for ever; a reader that loses its way
	// in the ring reads a block out of order.
	wantOf := func(c cfg) string {
		if strings.HasPrefix(c.name, "broken15") {
			return "assertion violated"
		}
		return "invalid end state"
	}
	var cs []check
	for _, c := range good {
		cs = append(cs, check{name: c.name + "/safety", defs: c.defs, reached: c.reached})
		if c.live {
			cs = append(cs, check{name: c.name + "/liveness", defs: c.defs, live: true})
		}
	}
	for _, c := range bad {
		cs = append(cs, check{name: c.name + "/safety", defs: c.defs, broken: true, want: wantOf(c)})
		if c.live {
			cs = append(cs, check{name: c.name + "/liveness", defs: c.defs, live: true, broken: true, want: "acceptance cycle"})
		}
	}
	return cs
}

var (
	errorsRe  = regexp.MustCompile(`errors: (\d+)`)
	storedRe  = regexp.MustCompile(`(\d+) states, stored`)
	depthRe   = regexp.MustCompile(`depth reached (\d+)`)
	elapsedRe = regexp.MustCompile(`elapsed time ([0-9.e+]+) seconds`)
)

func TestModel(t *testing.T) {
	spin := need(t, "spin")
	gcc := need(t, "gcc")
	model, err := filepath.Abs("direct.pml")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out, table := verify(t, spin, gcc, src, c)
			report(t, c, out, table)
		})
	}
}

// verify generates, compiles and runs the verifier of c in a temporary
// directory and returns pan's output and the verifier's transition table
// (pan.t: every statement of the model as compiled for c).
func verify(t *testing.T, spin, gcc string, src []byte, c check) (out, table string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "direct.pml"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) string {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		b, err := cmd.CombinedOutput()
		// pan exits 0 also when it finds errors; a failure to run is fatal.
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, b)
		}
		return string(b)
	}
	var sargs []string
	for _, d := range c.defs {
		sargs = append(sargs, "-D"+d)
	}
	run(spin, append(sargs, "-a", "direct.pml")...)
	b, err := os.ReadFile(filepath.Join(dir, "pan.t"))
	if err != nil {
		t.Fatal(err)
	}
	cargs := []string{"-O1", "-w", "-o", "pan"}
	pargs := []string{"-m200000", "-w21"}
	if c.live {
		pargs = append(pargs, "-a")
	} else {
		// No claim: pan checks invalid end states (a claim disables that).
		cargs = append(cargs, "-DSAFETY", "-DNOCLAIM")
	}
	run(gcc, append(cargs, "pan.c")...)
	start := time.Now()
	out = run(filepath.Join(dir, "pan"), pargs...)
	t.Logf("spin %s; pan %s: %.2fs wall", strings.Join(sargs, " "), strings.Join(pargs, " "), time.Since(start).Seconds())
	return out, string(b)
}

// report checks pan's verdict against what c expects and logs its numbers.
func report(t *testing.T, c check, out, table string) {
	t.Helper()
	m := errorsRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no verdict in pan's output:\n%s", out)
	}
	nerr, _ := strconv.Atoi(m[1])
	num := func(re *regexp.Regexp) string {
		if m := re.FindStringSubmatch(out); m != nil {
			return m[1]
		}
		return "?"
	}
	t.Logf("errors %d, %s states stored, depth %s, %ss", nerr, num(storedRe), num(depthRe), num(elapsedRe))
	if strings.Contains(out, "depth too small") {
		t.Fatalf("the search was cut at the depth limit: raise -m\n%s", out)
	}
	if c.broken {
		if nerr == 0 {
			t.Fatalf("pan found no error in a broken variant: the model does not catch the bug\n%s", out)
		}
		if !strings.Contains(out, c.want) {
			t.Fatalf("pan found %d errors, but not %q\n%s", nerr, c.want, out)
		}
		t.Logf("found, as it must: %s", firstLine(out, c.want))
		return
	}
	if nerr != 0 {
		t.Fatalf("pan found %d errors in the protocol (replay: spin -t -p %s direct.pml)\n%s",
			nerr, defsArgs(c.defs), out)
	}
	// The search found no error: the sleeps and wakes of this
	// configuration must be in the model (the table) and not among the
	// statements pan lists as never executed.
	unreached := ""
	if i := strings.Index(out, "unreached in"); i >= 0 {
		unreached = out[i:]
	}
	for _, s := range c.reached {
		if !strings.Contains(table, `"`+s+`"`) {
			t.Errorf("%q is not in the model as compiled: update the test's statement lists", s)
		} else if strings.Contains(unreached, `"`+s+`"`) {
			t.Errorf("%q is never executed: the configuration does not exercise that wait\n%s", s, out)
		}
	}
}

func firstLine(out, sub string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, sub) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

func defsArgs(defs []string) string {
	var b strings.Builder
	for _, d := range defs {
		fmt.Fprintf(&b, "-D%s ", d)
	}
	return strings.TrimSpace(b.String())
}
