package coretest

import (
	"fmt"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// conn is one side's queue pair with its completion queues.
type conn struct {
	qp       verbs.QueuePair
	scq, rcq verbs.CompletionQueue
	cfg      verbs.QPConfig
	closer   *owned // the queue pair's, for cases that close it early
}

// Defaults for queue pairs and completion queues of the suite; a case
// overrides what it tests.
const (
	defaultMaxSend   = 64
	defaultMaxRecv   = 64
	defaultMaxInline = 64
	defaultMaxSGE    = 4
	defaultCQDepth   = 512
)

// newConn creates a queue pair in QPInit with its own completion queues
// (unless cfg names them); zero limits in cfg get the suite's defaults.
func (s *side) newConn(cfg verbs.QPConfig) *conn { return s.newConnOn(s.p, cfg) }

// newConnOn is newConn on provider p (the side's own or an extra one).
func (s *side) newConnOn(p verbs.Provider, cfg verbs.QPConfig) *conn {
	if cfg.MaxSend == 0 {
		cfg.MaxSend = defaultMaxSend
	}
	if cfg.MaxRecv == 0 {
		cfg.MaxRecv = defaultMaxRecv
	}
	if cfg.MaxInline == 0 {
		cfg.MaxInline = defaultMaxInline
	}
	if cfg.MaxSGE == 0 {
		cfg.MaxSGE = defaultMaxSGE
	}
	if cfg.SendCQ == nil {
		cfg.SendCQ = s.newCQOn(p, defaultCQDepth)
	}
	if cfg.RecvCQ == nil {
		cfg.RecvCQ = s.newCQOn(p, defaultCQDepth)
	}
	qp, err := p.CreateQP(cfg)
	s.must(err, "CreateQP(%+v)", limits(cfg))
	c := &conn{qp: qp, scq: cfg.SendCQ, rcq: cfg.RecvCQ, cfg: cfg}
	c.closer = s.own(fmt.Sprintf("queue pair %d", qp.Number()), qp)
	if st := qp.State(); st != verbs.QPInit {
		s.fatalf("new queue pair is in state %v, want %v", st, verbs.QPInit)
	}
	return c
}

func (s *side) newCQ(depth int) verbs.CompletionQueue { return s.newCQOn(s.p, depth) }

func (s *side) newCQOn(p verbs.Provider, depth int) verbs.CompletionQueue {
	cq, err := p.CreateCQ(depth)
	s.must(err, "CreateCQ(%d)", depth)
	s.own("completion queue", cq)
	return cq
}

// swapEndpoints sends c's endpoint to the other side and returns the
// other side's. Both sides call it; the messages are small enough that
// sending first never blocks.
func (s *side) swapEndpoints(c *conn) verbs.Endpoint {
	ep, err := c.qp.LocalEndpoint()
	s.must(err, "LocalEndpoint")
	s.must(s.link.sendEndpoint(ep), "send endpoint")
	remote, err := s.link.recvEndpoint()
	s.must(err, "receive endpoint")
	return remote
}

// connectTo connects c to the remote endpoint and checks it is ready.
func (s *side) connectTo(c *conn, remote verbs.Endpoint) {
	s.must(c.qp.Connect(remote), "Connect")
	if st := c.qp.State(); st != verbs.QPReady {
		s.fatalf("queue pair is in state %v after Connect, want %v", st, verbs.QPReady)
	}
}

// connect creates a queue pair and connects it to the one the other side
// creates with its matching connect call. It returns once both sides have
// checked their queue pair is ready, so that nothing either side does next
// (close it, fail it with a bad request) can race the other's check.
func (s *side) connect(cfg verbs.QPConfig) *conn { return s.connectOn(s.p, cfg) }

// connectOn is connect with the queue pair created on provider p.
func (s *side) connectOn(p verbs.Provider, cfg verbs.QPConfig) *conn {
	c := s.newConnOn(p, cfg)
	s.connectTo(c, s.swapEndpoints(c))
	s.step("connected")
	s.await("connected")
	return c
}

// region registers size bytes with access; the side closes it at the end.
func (s *side) region(size int, access verbs.Access) verbs.Region {
	return s.regionOn(s.p, size, access)
}

// regionOn is region on provider p.
func (s *side) regionOn(p verbs.Provider, size int, access verbs.Access) verbs.Region {
	r, err := p.RegisterRegion(size, access)
	s.must(err, "RegisterRegion(%d, %s)", size, accessString(access))
	s.own(fmt.Sprintf("region of %d bytes", size), r)
	if got := len(r.Bytes()); got != size {
		s.fatalf("RegisterRegion(%d): Bytes() has %d bytes", size, got)
	}
	return r
}

// postSend posts wr and fails the side if any of its chain is refused.
func (s *side) postSend(c *conn, wr *verbs.SendRequest) {
	if bad, err := c.qp.PostSend(wr); err != nil {
		id := uint64(0)
		if bad != nil {
			id = bad.ID
		}
		s.fatalf("PostSend (request %d, %v): %v", id, wr.Op, err)
	}
}

// postRecv posts wr and fails the side if any of its chain is refused.
func (s *side) postRecv(c *conn, wr *verbs.RecvRequest) {
	if bad, err := c.qp.PostRecv(wr); err != nil {
		id := uint64(0)
		if bad != nil {
			id = bad.ID
		}
		s.fatalf("PostRecv (request %d): %v", id, err)
	}
}

// sge names bytes [off, off+n) of r.
func sge(r verbs.Region, off, n int) verbs.SGE {
	return verbs.SGE{Key: r.LocalKey(), Offset: uint64(off), Length: uint32(n)}
}

func limits(c verbs.QPConfig) string {
	return fmt.Sprintf("send %d, recv %d, inline %d, sge %d", c.MaxSend, c.MaxRecv, c.MaxInline, c.MaxSGE)
}

func accessString(a verbs.Access) string {
	s := ""
	for _, f := range []struct {
		bit  verbs.Access
		name string
	}{{verbs.AccessLocalWrite, "local-write"}, {verbs.AccessRemoteWrite, "remote-write"}, {verbs.AccessRemoteRead, "remote-read"}} {
		if a&f.bit != 0 {
			if s != "" {
				s += "|"
			}
			s += f.name
		}
	}
	if s == "" {
		return "none"
	}
	return s
}

const (
	accessAll               = verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead
	accessNone verbs.Access = 0
)
