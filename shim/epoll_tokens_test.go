package shim

import (
	"maps"
	"slices"
	"testing"
)

// TestEpollOursTokens: the tokens a snapshot publishes (ours) stay the
// set's live and retired tokens, ascending, through more retirements
// than the set remembers (the oldest retired ones leave), with entries
// that live long beside them (their tokens stay at the front).
func TestEpollOursTokens(t *testing.T) {
	set := &epollSet{tokens: map[uint64]*epollEntry{}}
	set.mu.Lock()
	defer set.mu.Unlock()
	check := func(when string) {
		t.Helper()
		want := slices.Collect(maps.Keys(set.tokens))
		want = append(want, set.retiredQ...)
		slices.Sort(want)
		if !slices.Equal(set.ours, want) {
			t.Fatalf("%s: ours has %d tokens, want %d (live %d, retired %d)", when, len(set.ours), len(want), len(set.tokens), len(set.retiredQ))
		}
	}
	for i := range maxRetired + 3000 {
		tok := newEpollToken()
		set.tokens[tok] = &epollEntry{token: tok}
		set.oursAddLocked(tok)
		if i%500 == 0 {
			continue // a long-lived entry
		}
		if i%7 == 0 && i > 0 {
			// Retire an older live one first (out of token order).
			for old := range set.tokens {
				if old != tok {
					delete(set.tokens, old)
					set.retireLocked(old)
					break
				}
			}
		}
		delete(set.tokens, tok)
		set.retireLocked(tok)
		if i%10000 == 0 {
			check("after retiring")
		}
	}
	check("at the end")
	if len(set.retiredQ) != maxRetired {
		t.Fatalf("retired %d, want the bound %d", len(set.retiredQ), maxRetired)
	}
	// A token below the last one (never drawn so today) still lands in order.
	low := set.ours[0] - 1
	set.tokens[low] = &epollEntry{token: low}
	set.oursAddLocked(low)
	check("after an out-of-order add")
}
