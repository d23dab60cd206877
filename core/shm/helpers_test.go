package shm

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// waitLimit bounds every wait in these tests: a test fails rather than hangs.
const waitLimit = 20 * time.Second

// side is one end of a test connection: its own provider, one CQ for both
// queues, a queue pair and a region with every access right.
type side struct {
	p  *Provider
	cq verbs.CompletionQueue
	qp verbs.QueuePair
	mr verbs.Region
}

func (s *side) q() *queuePair { return s.qp.(*queuePair) }

func newSide(t testing.TB, cfg verbs.QPConfig, regionSize int) *side {
	t.Helper()
	p, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	s := &side{p: p}
	if s.cq, err = p.CreateCQ(1024); err != nil {
		t.Fatal(err)
	}
	cfg.SendCQ, cfg.RecvCQ = s.cq, s.cq
	if s.qp, err = p.CreateQP(cfg); err != nil {
		t.Fatal(err)
	}
	if s.mr, err = p.RegisterRegion(regionSize, accessAll); err != nil {
		t.Fatal(err)
	}
	return s
}

// close releases everything and checks that each object closes cleanly.
func (s *side) close(t testing.TB) {
	t.Helper()
	if err := s.qp.Close(); err != nil && !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("close QP: %v", err)
	}
	if err := s.mr.Close(); err != nil && !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("close region: %v", err)
	}
	if err := s.cq.Close(); err != nil {
		t.Errorf("close CQ: %v", err)
	}
	if err := s.p.Close(); err != nil {
		t.Errorf("close provider: %v", err)
	}
}

// connect connects a and b by passing each one's Endpoint to the other
// directly (same process).
func connect(t testing.TB, a, b *side) {
	t.Helper()
	ea, err := a.qp.LocalEndpoint()
	if err != nil {
		t.Fatal(err)
	}
	eb, err := b.qp.LocalEndpoint()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.qp.Connect(eb); err != nil {
		t.Fatal(err)
	}
	if err := b.qp.Connect(ea); err != nil {
		t.Fatal(err)
	}
}

// newPair returns two connected sides and closes them at cleanup.
func newPair(t testing.TB, cfg verbs.QPConfig, regionSize int) (a, b *side) {
	t.Helper()
	a, b = newSide(t, cfg, regionSize), newSide(t, cfg, regionSize)
	t.Cleanup(func() { a.close(t); b.close(t) })
	connect(t, a, b)
	return a, b
}

// waitCQ returns the next n completions of cq, sleeping on its
// notification fd between polls; it fails the test after waitLimit.
func waitCQ(t testing.TB, cq verbs.CompletionQueue, n int) []verbs.Completion {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	out := make([]verbs.Completion, 0, n)
	buf := make([]verbs.Completion, n)
	for len(out) < n {
		k, err := cq.Poll(buf[:n-len(out)])
		if err != nil {
			t.Fatalf("poll: %v (after %d completions: %+v)", err, len(out), out)
		}
		out = append(out, buf[:k]...)
		if len(out) == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %d of %d completions: %+v", len(out), n, out)
		}
		if err := cq.Arm(); err != nil {
			t.Fatal(err)
		}
		if k, _ = cq.Poll(buf[:n-len(out)]); k > 0 {
			out = append(out, buf[:k]...)
			continue
		}
		pfd := []unix.PollFd{{Fd: int32(cq.NotifyFD()), Events: unix.POLLIN}}
		unix.Poll(pfd, 100)
		cq.AckNotify()
	}
	return out
}

// waitFor polls cond until it holds or waitLimit passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// wantStatus checks one completion.
func wantStatus(t testing.TB, c verbs.Completion, id uint64, op verbs.Opcode, st verbs.Status) {
	t.Helper()
	if c.ID != id || c.Op != op || c.Status != st {
		t.Errorf("completion %+v (status %v), want id %d op %v status %v", c, c.Status, id, op, st)
	}
}

// countFDs returns the number of open descriptors of this process.
func countFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func sge(r verbs.Region, off uint64, n uint32) []verbs.SGE {
	return []verbs.SGE{{Key: r.LocalKey(), Offset: off, Length: n}}
}

func isErr(err, target error) bool { return errors.Is(err, target) }

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// connectViaSocket connects a and b with Endpoints sent through a unix
// socket, as between processes: each Connect receives fresh descriptors.
func connectViaSocket(t testing.TB, a, b *side) {
	t.Helper()
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sp[0])
	defer unix.Close(sp[1])
	for _, pair := range []struct {
		from, to *side
	}{{a, b}, {b, a}} {
		ep, err := pair.from.qp.LocalEndpoint()
		if err != nil {
			t.Fatal(err)
		}
		if err := verbs.SendEndpoint(sp[0], ep); err != nil {
			t.Fatal(err)
		}
		got, err := verbs.RecvEndpoint(sp[1])
		if err != nil {
			t.Fatal(err)
		}
		if err := pair.to.qp.Connect(got); err != nil {
			t.Fatal(err)
		}
	}
}
