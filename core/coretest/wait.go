package coretest

import (
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/sdpshim/sdpshim/core/sharedmem"
	"github.com/sdpshim/sdpshim/core/verbs"
)

// Waiting in the suite polls with a growing pause (yield, then up to a
// millisecond) and gives up at the side's deadline, so a provider that
// never delivers fails the case instead of hanging it. Nothing is timed:
// the deadline is a hang guard, not a performance bound.

type backoff struct{ n int }

func (b *backoff) pause() {
	b.n++
	switch {
	case b.n < 64:
		runtime.Gosched()
	default:
		time.Sleep(min(time.Duration(b.n-63)*20*time.Microsecond, time.Millisecond))
	}
}

func (s *side) expired() bool { return time.Now().After(s.deadline) }

// completions waits until n completions have been polled from cq and
// returns them in the order Poll gave them. It never polls more than n.
func (s *side) completions(cq verbs.CompletionQueue, n int, what string) []verbs.Completion {
	got := make([]verbs.Completion, 0, n)
	out := make([]verbs.Completion, n)
	var b backoff
	for len(got) < n {
		k, err := cq.Poll(out[:n-len(got)])
		s.must(err, "Poll waiting for %s", what)
		if k < 0 || k > n-len(got) {
			s.fatalf("Poll into %d slots returned %d", n-len(got), k)
		}
		got = append(got, out[:k]...)
		if k > 0 {
			b = backoff{}
			continue
		}
		if s.expired() {
			s.fatalf("deadline passed waiting for %s: got %d of %d completions: %s", what, len(got), n, fmtCompletions(got))
		}
		b.pause()
	}
	return got
}

// one waits for a single completion and checks it.
func (s *side) one(cq verbs.CompletionQueue, id uint64, op verbs.Opcode, st verbs.Status) verbs.Completion {
	c := s.completions(cq, 1, fmt.Sprintf("%v completion of request %d", op, id))[0]
	s.check(c, id, op, st)
	return c
}

// check fails the side unless c completes request id with op and status.
// An error completion's opcode is not checked: verbs leaves it undefined.
func (s *side) check(c verbs.Completion, id uint64, op verbs.Opcode, st verbs.Status) {
	if c.ID != id || c.Status != st || (st == verbs.StatusSuccess && c.Op != op) {
		s.fatalf("completion %s, want request %d %v %v", fmtCompletion(c), id, op, st)
	}
}

// noCompletion fails the side if cq holds a completion now. It is used
// only where no correct provider can have produced one yet, so it never
// fails a correct provider, whatever the timing.
func (s *side) noCompletion(cq verbs.CompletionQueue, why string) {
	out := make([]verbs.Completion, 8)
	k, err := cq.Poll(out)
	s.must(err, "Poll")
	if k > 0 {
		s.fatalf("unexpected completion (%s): %s", why, fmtCompletions(out[:k]))
	}
}

// waitState waits until qp reaches want.
func (s *side) waitState(qp verbs.QueuePair, want verbs.QPState, why string) {
	var b backoff
	for {
		st := qp.State()
		if st == want {
			return
		}
		if s.expired() {
			s.fatalf("queue pair stayed in state %v, want %v (%s)", st, want, why)
		}
		b.pause()
	}
}

// waitWord waits until the shared 32-bit word at buf[off:] holds want.
func (s *side) waitWord(buf []byte, off int, want uint32, what string) {
	w := sharedmem.Uint32At(buf, off)
	var b backoff
	for {
		v := w.Load()
		if v == want {
			return
		}
		if s.expired() {
			s.fatalf("deadline passed waiting for %s: word at %d is %#x, want %#x", what, off, v, want)
		}
		b.pause()
	}
}

// waitByte waits until the shared byte buf[i] holds want.
func (s *side) waitByte(buf []byte, i int, want byte, what string) {
	var b backoff
	for {
		v := sharedmem.LoadByte(buf, i)
		if v == want {
			return
		}
		if s.expired() {
			s.fatalf("deadline passed waiting for %s: byte %d is %#x, want %#x", what, i, v, want)
		}
		b.pause()
	}
}

func fmtCompletion(c verbs.Completion) string {
	s := fmt.Sprintf("{id %d, qp %d, %v, %v, %d bytes", c.ID, c.QP, c.Op, c.Status, c.ByteLen)
	if c.HasImm {
		s += fmt.Sprintf(", imm %#x", c.Imm)
	}
	return s + "}"
}

func fmtCompletions(cs []verbs.Completion) string {
	if len(cs) == 0 {
		return "none"
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmtCompletion(c)
	}
	return strings.Join(parts, ", ")
}
