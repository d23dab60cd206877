package coretest

import (
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"time"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// A side is one half of a case: its own Provider, its end of the link and
// the case's deadline. Side A runs in the test process; side B runs in a
// second goroutine (in-process) or in the peer process (cross-process).
// Case code reports failures with fatalf, which unwinds the side (like
// t.FailNow, but usable from any goroutine and from the peer process).
type side struct {
	role     string // "A" or "B"
	p        verbs.Provider
	link     *link
	deadline time.Time
	rng      *rand.Rand
	short    bool

	// open opens another Provider of the harness (a second protection
	// domain) for cases that need one; see extraProvider.
	open func() (verbs.Provider, error)

	// killPeer SIGKILLs the peer process; nil on side B and in-process.
	killPeer func()
	// peerKilled is set by killPeer: the final barrier is skipped.
	peerKilled bool

	owned []*owned
	logs  []string
}

// failure is the panic value of fatalf.
type failure struct{ msg string }

func (f failure) Error() string { return f.msg }

func (s *side) fatalf(format string, args ...any) {
	panic(failure{fmt.Sprintf(format, args...)})
}

func (s *side) logf(format string, args ...any) {
	s.logs = append(s.logs, fmt.Sprintf(format, args...))
}

// must fails the side when err is not nil.
func (s *side) must(err error, what string, args ...any) {
	if err != nil {
		s.fatalf("%s: %v", fmt.Sprintf(what, args...), err)
	}
}

// step sends a named step to the other side; await waits for it.
func (s *side) step(name string)  { s.must(s.link.sendStep(name), "send step %q", name) }
func (s *side) await(name string) { s.must(s.link.recvStep(name), "link") }

func (s *side) sendWords(v ...uint64) { s.must(s.link.sendWords(kindWords, v...), "send words") }

func (s *side) recvWords(n int) []uint64 {
	v, err := s.link.recvWords(kindWords)
	s.must(err, "receive words")
	if n >= 0 && len(v) != n {
		s.fatalf("received %d words, want %d", len(v), n)
	}
	return v
}

func (s *side) sendRegion(r verbs.Region) { s.must(s.link.sendRegion(r.Remote()), "send region") }

func (s *side) recvRegion() verbs.RemoteRegion {
	r, err := s.link.recvRegion()
	s.must(err, "receive region")
	return r
}

// owned is a provider object the side closes at the end of the case,
// newest first, unless the case closed it already.
type owned struct {
	name string
	c    interface{ Close() error }
	done bool
}

func (o *owned) Close() error {
	if o.done {
		return nil
	}
	o.done = true
	if err := o.c.Close(); err != nil {
		return fmt.Errorf("close %s: %w", o.name, err)
	}
	return nil
}

func (s *side) own(name string, c interface{ Close() error }) *owned {
	o := &owned{name: name, c: c}
	s.owned = append(s.owned, o)
	return o
}

// closeNow closes o in the middle of a case; an error fails the side.
func (s *side) closeNow(o *owned) { s.must(o.Close(), "side %s", s.role) }

// run runs fn as this side of a case, then meets the other side at a final
// barrier (so neither closes its queue pairs while the other still checks
// them) and closes what the side owns, its Provider last. It returns the
// failure, if any; on failure it closes the link first so that the other
// side stops waiting.
func (s *side) run(fn func(*side)) (err error) {
	defer func() {
		if r := recover(); r != nil {
			switch r := r.(type) {
			case failure:
				err = r
			default:
				err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
			}
			s.link.close()
			s.closeOwned() // best effort; the failure is what matters
		}
	}()
	fn(s)
	if !s.peerKilled {
		s.step("done")
		s.await("done")
	}
	if errs := s.closeOwned(); len(errs) > 0 {
		s.fatalf("closing at the end of the case: %s", strings.Join(errs, "; "))
	}
	s.link.close()
	return nil
}

func (s *side) closeOwned() []string {
	var errs []string
	for i := len(s.owned) - 1; i >= 0; i-- {
		if err := closeRecovering(s.owned[i]); err != nil {
			errs = append(errs, err.Error())
		}
	}
	s.owned = nil
	return errs
}

func closeRecovering(o *owned) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("close %s: panic: %v\n%s", o.name, r, debug.Stack())
		}
	}()
	return o.Close()
}
