package shim

import (
	"net/netip"
	"testing"
	"time"
)

// shortClock drives a shortConns' history through plain's clock.
type shortClock struct {
	t   *testing.T
	c   shortConns
	dst netip.AddrPort
	now int64
}

// connect is a connect() to dst: whether it stays plain, and whether it is
// the probe.
func (k *shortClock) connect() (plain, probe bool) { return k.c.plain(k.dst, k.now) }

// short and long close an accelerated connection (the probe or not).
func (k *shortClock) short(probe bool) {
	k.c.record(k.dst, time.Millisecond, 2*time.Millisecond, probe)
}
func (k *shortClock) long(probe bool) {
	k.c.record(k.dst, time.Millisecond, 50*time.Millisecond, probe)
}

// plainRun counts the connections that stay plain before one that does
// not, which it returns as the probe (true) or not.
func (k *shortClock) plainRun() (int, bool) {
	n := 0
	for {
		plain, probe := k.connect()
		if !plain {
			return n, probe
		}
		n++
	}
}

// TestShortConns: eight short connections in a row to a destination make
// the next eight plain; then one probe is accelerated, and a short probe
// doubles the plain run (to at most 256), a long one starts afresh; other
// destinations are not touched.
func TestShortConns(t *testing.T) {
	k := &shortClock{t: t, dst: netip.MustParseAddrPort("127.0.0.1:5432"), now: int64(time.Hour)}
	k.c.init(nil) // the runs kept here (ownRuns)
	other := netip.MustParseAddrPort("127.0.0.1:6379")
	for range shortStreak - 1 {
		if plain, probe := k.connect(); plain || probe {
			t.Fatal("plain or a probe while the streak builds")
		}
		k.short(false)
	}
	k.short(false)
	if n, probe := k.plainRun(); n != shortRunMin || !probe {
		t.Fatalf("first plain run %d (then a probe: %v), want %d", n, probe, shortRunMin)
	}
	if plain, _ := k.c.plain(other, k.now); plain {
		t.Fatal("another destination made plain")
	}
	k.short(true)
	if n, probe := k.plainRun(); n != 2*shortRunMin || !probe {
		t.Fatalf("second plain run %d (probe %v), want %d", n, probe, 2*shortRunMin)
	}
	for range 10 {
		k.short(true)
		k.plainRun()
	}
	k.short(true)
	if n, _ := k.plainRun(); n != shortRunMax {
		t.Fatalf("plain run %d, want the cap %d", n, shortRunMax)
	}
	k.long(true) // the probe lived: everything afresh
	for range shortStreak - 1 {
		k.short(false)
	}
	if plain, _ := k.connect(); plain {
		t.Fatal("plain after a long probe and 7 short connections")
	}
	k.short(false)
	// Connections opened before the plain run that close during it leave
	// it as it is.
	k.short(false)
	k.short(false)
	if n, _ := k.plainRun(); n != shortRunMin {
		t.Fatalf("plain run after a long probe %d, want %d", n, shortRunMin)
	}
}

// TestShortConnsOneProbe: after a plain run, connections opened while the
// probe is open stay plain, so a program with several connections open
// at once sends one probe, not one per connection; the probe's close ends
// the wait, one open for shortProbeLong counts as long (afresh), and one
// that closed without acceleration lets the next connection probe.
func TestShortConnsOneProbe(t *testing.T) {
	k := &shortClock{t: t, dst: netip.MustParseAddrPort("127.0.0.1:5432"), now: int64(time.Hour)}
	k.c.init(nil) // the runs kept here (ownRuns)
	for range shortStreak {
		k.connect()
		k.short(false)
	}
	if n, probe := k.plainRun(); n != shortRunMin || !probe {
		t.Fatalf("plain run %d (probe %v)", n, probe)
	}
	for i := range 3 { // three more connect while the probe is open
		if plain, probe := k.connect(); !plain || probe {
			t.Fatalf("connection %d beside the open probe: plain %v, probe %v", i, plain, probe)
		}
	}
	k.short(true)
	if n, probe := k.plainRun(); n != 2*shortRunMin || !probe {
		t.Fatalf("plain run after the probe %d (probe %v), want %d", n, probe, 2*shortRunMin)
	}
	// The probe fell back (closed without a verdict): the next one probes.
	k.c.probeEnded(k.dst)
	if plain, probe := k.connect(); plain || !probe {
		t.Fatalf("after a probe that ended unjudged: plain %v, probe %v", plain, probe)
	}
	// That probe stays open past shortProbeLong: afresh.
	k.now += shortProbeLong - 1
	if plain, _ := k.connect(); !plain {
		t.Fatal("accelerated while the probe is open")
	}
	k.now++
	if plain, probe := k.connect(); plain || probe {
		t.Fatalf("a probe open %v: plain %v, probe %v, want afresh", time.Duration(shortProbeLong), plain, probe)
	}
	for range shortStreak - 1 {
		if plain, _ := k.connect(); plain {
			t.Fatal("plain while the streak builds again")
		}
	}
}
