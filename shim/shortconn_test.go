package shim

import (
	"net/netip"
	"testing"
	"time"
)

// TestShortConns: eight short connections in a row to a destination make
// the next eight plain; a short probe doubles the plain run (to at most
// 256), a long one starts afresh; other destinations are not touched.
func TestShortConns(t *testing.T) {
	var c shortConns
	dst := netip.MustParseAddrPort("127.0.0.1:5432")
	other := netip.MustParseAddrPort("127.0.0.1:6379")
	short := func() { c.record(dst, time.Millisecond, 2*time.Millisecond) }
	long := func() { c.record(dst, time.Millisecond, 50*time.Millisecond) }
	plainRun := func() int {
		n := 0
		for c.plain(dst) {
			n++
		}
		return n
	}
	for range shortStreak - 1 {
		short()
	}
	if c.plain(dst) {
		t.Fatal("plain after 7 short connections")
	}
	short()
	if n := plainRun(); n != shortRunMin {
		t.Fatalf("first plain run %d, want %d", n, shortRunMin)
	}
	if c.plain(other) {
		t.Fatal("another destination made plain")
	}
	short() // the probe
	if n := plainRun(); n != 2*shortRunMin {
		t.Fatalf("second plain run %d, want %d", n, 2*shortRunMin)
	}
	for range 10 {
		short()
		plainRun()
	}
	short()
	if n := plainRun(); n != shortRunMax {
		t.Fatalf("plain run %d, want the cap %d", n, shortRunMax)
	}
	long() // the probe lived: everything afresh
	for range shortStreak - 1 {
		short()
	}
	if c.plain(dst) {
		t.Fatal("plain after a long probe and 7 short connections")
	}
	short()
	// Connections opened before the plain run that close during it leave
	// it as it is.
	short()
	short()
	if n := plainRun(); n != shortRunMin {
		t.Fatalf("plain run after a long probe %d, want %d", n, shortRunMin)
	}
}
