package mux

import (
	"io"
	"os"

	"github.com/sdpshim/sdpshim/core/wire"
)

// Read reads what has arrived, up to len(p) bytes, waiting for at least
// one byte unless the stream is nonblocking (ErrWouldBlock) or the read
// deadline passes (os.ErrDeadlineExceeded). It returns io.EOF once the
// peer's FIN was reached, ErrReset after the peer's reset,
// ErrStreamClosed after Close, and the channel's error once it ended.
// Reading frees blocks, which may send flow-control records.
func (s *Stream) Read(p []byte) (int, error) { return s.read(p, false) }

// Peek is Read without consuming (MSG_PEEK): the bytes stay for the next
// Read.
func (s *Stream) Peek(p []byte) (int, error) { return s.read(p, true) }

func (s *Stream) read(p []byte, peek bool) (int, error) {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	c := s.c
	s.enter()
	defer s.leave()
	pumped := false
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return 0, ErrStreamClosed
		}
		if len(p) == 0 {
			s.mu.Unlock()
			return 0, nil
		}
		if s.rxBytes > 0 {
			n, more := s.copyOutLocked(p, peek)
			s.mu.Unlock()
			if more {
				c.flush()
			}
			return n, nil
		}
		err := s.readErrLocked()
		nb, dl, gen := s.nonblock, s.rdl, s.dlGen
		// Bytes this stream holds to send go out while the application
		// waits here, as space frees: it is calling in (packed's progress).
		held := s.queued > 0
		s.mu.Unlock()
		switch {
		case err != nil:
			return 0, err
		case nb:
			if !pumped {
				pumped = true
				c.pumpWait()
				continue
			}
			return 0, wire.ErrWouldBlock
		case passed(dl):
			return 0, os.ErrDeadlineExceeded
		}
		ready := func() bool {
			c.pump()
			if held {
				c.flush()
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.rxBytes > 0 || s.readErrLocked() != nil || s.closed || s.dlGen != gen
		}
		if err := s.rwait.Wait(ready, c.localBell(&s.ev, held), dl); err != nil && s.Buffered() == 0 {
			if err == os.ErrDeadlineExceeded && s.deadlineMoved(gen) {
				continue
			}
			return 0, err
		}
	}
}

// readErrLocked returns what a Read returns when no data is buffered:
// io.EOF, ErrReset, the channel's error, or nil (wait).
//
// +checklocks:s.mu
func (s *Stream) readErrLocked() error {
	switch {
	case s.resetIn:
		return ErrReset
	case s.finIn:
		return io.EOF
	case s.err != nil:
		return s.err
	}
	return nil
}

// copyOutLocked copies up to len(p) buffered bytes; unless peek it
// consumes them, releasing finished blocks. It reports whether control
// records were queued (the caller flushes).
//
// +checklocks:s.mu
func (s *Stream) copyOutLocked(p []byte, peek bool) (int, bool) {
	n := 0
	if peek {
		off := s.rxOff
		for i := 0; n < len(p) && i < len(s.rxq); i++ {
			n += copy(p[n:], s.rxq[i].Payload[off:])
			off = 0
		}
		return n, false
	}
	more := false
	for n < len(p) && len(s.rxq) > 0 {
		b := &s.rxq[0]
		k := copy(p[n:], b.Payload[s.rxOff:])
		n += k
		s.rxOff += k
		s.rxBytes -= k
		if s.rxOff < len(b.Payload) {
			break
		}
		s.c.release(*b)
		if rec, ok := s.fc.Consumed(len(b.Payload)); ok {
			s.ctrlOut = append(s.ctrlOut, rec)
			s.activateLocked()
			more = true
		}
		s.rxOff = 0
		s.rxq[0] = wire.Block{}
		s.rxq = s.rxq[1:]
	}
	if len(s.rxq) == 0 {
		s.rxq = nil
	}
	return n, more
}

// Buffered returns the bytes a Read would return at once (FIONREAD):
// in-order data not yet read.
func (s *Stream) Buffered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rxBytes
}

// ReadReady reports whether a Read would return without waiting: data,
// EOF or an error (poll's POLLIN). It moves arrived blocks first.
func (s *Stream) ReadReady() bool {
	s.c.pumpWait()
	return s.ReadReadyNow()
}

// enter and leave count an application call in progress: while one is,
// held data of a controller without AsyncFlush may be flushed (the
// RDMA-based design makes progress only when the application calls in).
func (s *Stream) enter() {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
}

func (s *Stream) leave() {
	s.mu.Lock()
	s.calls--
	s.mu.Unlock()
}

// deadlineMoved reports whether a deadline or mode changed since gen.
func (s *Stream) deadlineMoved(gen uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dlGen != gen
}
