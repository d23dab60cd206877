package mux

// Abort closes the stream with a reset, as close(2) does with SO_LINGER
// set to zero: unread and held data are dropped and the peer's calls
// fail with a reset instead of reading a FIN. A stream closed already
// returns an error wrapping ErrStreamClosed.
func (s *Stream) Abort() error {
	s.mu.Lock()
	if !s.closed {
		s.dropRxLocked()
		s.dropHeldLocked()
		if s.err == nil && !s.resetIn && s.resetOut == finNone {
			s.resetOut = finQueued // Close then queues no FIN
			s.activateLocked()
		}
	}
	s.mu.Unlock()
	return s.Close()
}

// Unsent returns the bytes written to the stream that have not gone into
// blocks yet (SIOCOUTQ: what the peer has not been handed).
func (s *Stream) Unsent() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queued
}
