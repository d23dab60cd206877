package mux

import (
	"os"

	"github.com/sdpshim/sdpshim/core/wire"
)

// Write sends p. A blocking Write returns when every byte is in blocks
// sent to the peer, or, for a buffered (coalescing) flow controller, once
// the rest is copied into the stream's send buffer. A nonblocking Write
// sends (and, buffered, copies) what it can and returns that count, or
// ErrWouldBlock when nothing went; past the write deadline Write returns
// the count so far with os.ErrDeadlineExceeded. After CloseWrite it
// returns ErrWriteShutdown, after a reset ErrReset.
func (s *Stream) Write(p []byte) (int, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	c := s.c
	s.enter()
	defer s.leave()
	s.mu.Lock()
	if err := s.writeErrLocked(); err != nil || len(p) == 0 {
		s.mu.Unlock()
		return 0, err
	}
	ch := &s.wchunk
	*ch = chunk{b: p}
	backlog := s.queued > 0 // earlier bytes wait: maybe for a credit or window
	s.sendq = append(s.sendq, ch)
	s.queued += len(p)
	s.activateLocked()
	nb := s.nonblock
	s.mu.Unlock()
	if backlog {
		c.pump() // take the control records that arrived meanwhile
	}
	if nb {
		c.flushWait()
	} else {
		c.flush()
	}
	for {
		s.mu.Lock()
		if len(ch.b) == 0 || ch.owned {
			s.mu.Unlock()
			return len(p), nil
		}
		if err := s.writeErrLocked(); err != nil {
			n := s.withdrawLocked(ch, len(p))
			s.mu.Unlock()
			return n, err
		}
		if s.fc.Buffered() {
			room := s.sendBufLocked() - s.owned
			if room >= len(ch.b) {
				s.ownLocked(ch)
				s.mu.Unlock()
				return len(p), nil
			}
			if s.nonblock && room > 0 {
				cut := len(ch.b) - room
				ch.b = ch.b[:room]
				s.queued -= cut
				s.ownLocked(ch)
				s.mu.Unlock()
				return len(p) - cut, nil
			}
		}
		nb, dl, gen := s.nonblock, s.wdl, s.dlGen
		if nb || passed(dl) {
			n := s.withdrawLocked(ch, len(p))
			s.mu.Unlock()
			switch {
			case !nb:
				return n, os.ErrDeadlineExceeded
			case n == 0:
				return 0, wire.ErrWouldBlock
			}
			return n, nil
		}
		s.mu.Unlock()
		ready := func() bool {
			c.pump() // credits and windows come in control blocks
			c.flush()
			s.mu.Lock()
			defer s.mu.Unlock()
			return len(ch.b) == 0 || s.writeErrLocked() != nil || s.dlGen != gen ||
				(s.fc.Buffered() && s.sendBufLocked()-s.owned >= len(ch.b))
		}
		s.wwait.Wait(ready, c.localBell(&s.ev, true), dl) // the loop re-checks every outcome
	}
}

// writeErrLocked returns why a Write cannot go on, or nil.
//
// +checklocks:s.mu
func (s *Stream) writeErrLocked() error {
	switch {
	case s.closed:
		return ErrStreamClosed
	case s.wrShut:
		return ErrWriteShutdown
	case s.resetIn || s.resetOut != finNone:
		return ErrReset
	case s.err != nil:
		return s.err
	}
	return nil
}

// withdrawLocked takes the unsent rest of a Write of total bytes out of
// the queue and returns how many bytes went.
//
// +checklocks:s.mu
func (s *Stream) withdrawLocked(ch *chunk, total int) int {
	for i, q := range s.sendq {
		if q == ch {
			s.sendq = append(s.sendq[:i], s.sendq[i+1:]...)
			s.queued -= len(ch.b)
			break
		}
	}
	n := total - len(ch.b)
	ch.b = nil
	return n
}

// ownLocked copies the caller's bytes of ch into a chunk the stream owns,
// which takes ch's place in the queue (ch is the Write's own and is
// reused by the next Write).
//
// +checklocks:s.mu
func (s *Stream) ownLocked(ch *chunk) {
	own := &chunk{b: append([]byte(nil), ch.b...), owned: true}
	for i, q := range s.sendq {
		if q == ch {
			s.sendq[i] = own
		}
	}
	s.owned += len(own.b)
	ch.b = nil
	ch.owned = true
}

// CloseWrite half-closes the stream (shutdown(SHUT_WR)): a FIN follows the
// queued data, and the peer reads io.EOF after it. Reading goes on.
// Calling it again does nothing.
func (s *Stream) CloseWrite() error {
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return ErrStreamClosed
	case s.err != nil && !s.wrShut:
		err := s.err
		s.mu.Unlock()
		return err
	}
	if !s.wrShut {
		s.wrShut = true
		if s.finOut == finNone && s.resetOut == finNone && !s.resetIn {
			s.finOut = finQueued
			s.activateLocked()
		}
		s.ev.signal()
	}
	s.mu.Unlock()
	s.c.flush()
	return nil
}

// WriteReady reports whether a Write would make progress without waiting
// (poll's POLLOUT): an error is pending, a buffered controller has send
// buffer room, or nothing is queued and the controller allows a block now.
// It takes arrived blocks (control records) and runs the scheduler first. For a credit controller it cannot see
// whether the transport has a free block, so it may say ready for a Write
// that then waits.
func (s *Stream) WriteReady() bool {
	s.enter()
	s.c.pumpWait()
	s.c.flushWait()
	s.leave()
	return s.WriteReadyNow()
}
