package mux

import (
	"fmt"
	"time"
)

// Close closes the stream (close(2) on the socket). Blocked Reads and
// Writes on it return ErrStreamClosed. When data is unread (or arrives
// later) the peer is reset, as TCP does; otherwise a FIN follows the
// queued data, which keeps flowing in the background. A second Close
// returns an error wrapping ErrStreamClosed.
func (s *Stream) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("stream %d: %w", s.id, ErrStreamClosed)
	}
	s.closed = true
	s.c.prog.linger.Add(1)
	s.c.prog.kick(true)
	unread := s.rxBytes > 0 || len(s.rxHold) > 0
	s.dropRxLocked()
	s.dropHeldLocked()
	if s.err == nil && !s.resetIn {
		switch {
		case unread && s.resetOut == finNone:
			s.resetOut = finQueued
			s.activateLocked()
		case s.finOut == finNone && s.resetOut == finNone:
			s.finOut = finQueued
			s.activateLocked()
		}
	}
	s.maybeDeleteLocked()
	s.ev.signal()
	s.mu.Unlock()
	s.c.flush()
	return nil
}

// SetDeadline sets the read and write deadlines (zero: none). A deadline
// applies to calls in progress too.
func (s *Stream) SetDeadline(t time.Time) error {
	return s.setDeadlines(&t, &t)
}

// SetReadDeadline sets the read deadline (zero: none).
func (s *Stream) SetReadDeadline(t time.Time) error { return s.setDeadlines(&t, nil) }

// SetWriteDeadline sets the write deadline (zero: none).
func (s *Stream) SetWriteDeadline(t time.Time) error { return s.setDeadlines(nil, &t) }

func (s *Stream) setDeadlines(r, w *time.Time) error {
	s.mu.Lock()
	if r != nil {
		s.rdl = *r
	}
	if w != nil {
		s.wdl = *w
	}
	s.dlGen++
	s.mu.Unlock()
	s.ev.signal()
	return nil
}

// SetNonblock switches the stream between blocking and nonblocking mode
// (O_NONBLOCK); calls in progress see the change.
func (s *Stream) SetNonblock(nonblock bool) {
	s.mu.Lock()
	s.nonblock = nonblock
	s.dlGen++
	s.mu.Unlock()
	s.ev.signal()
}

// passed reports whether the deadline t (zero: none) has passed.
func passed(t time.Time) bool { return !t.IsZero() && !time.Now().Before(t) }
