package mux

// Readiness of many streams at once. ReadReady and WriteReady pump the
// channel (and WriteReady runs its scheduler) before looking, which makes
// a scan over many streams of one channel (an epoll set's entries: one
// channel carries every stream between two processes) pump that channel
// once per stream. A caller scanning many streams calls Progress once per
// channel instead, then the streams' ReadReadyNow and WriteReadyNow.

// Progress does what ReadReady (and, with flush, WriteReady) does before
// looking: it moves the blocks that arrived to their streams and, with
// flush, sends what the scheduler can. It waits for a pump or flush in
// progress on another goroutine, so that what arrived before the call is
// seen after it.
func (c *Channel) Progress(flush bool) {
	c.pumpWait()
	if flush {
		c.flushWait()
	}
}

// ProgressPoll is Progress for a caller polling in a loop: it does not
// wait for a pump or flush in progress on another goroutine (which does
// it again for the caller), so what arrived may be seen only at a later
// call. The last check before a sleep uses Progress.
func (c *Channel) ProgressPoll(flush bool) {
	c.pump()
	if flush {
		c.flush()
	}
}

// ReadReadyNow is ReadReady without the pump: whether a read would not
// block given what the channel has already moved (Progress).
func (s *Stream) ReadReadyNow() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rxBytes > 0 || s.readErrLocked() != nil || s.closed
}

// WriteReadyNow is WriteReady without the pump and the flush (Progress
// with flush): whether a write would make progress now. Held data of a
// stream flows during the flush only while the stream counts as in an
// application call (an attended stream does).
func (s *Stream) WriteReadyNow() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writeErrLocked() != nil {
		return true
	}
	if s.fc.Buffered() {
		return s.owned < s.sendBufLocked()
	}
	return s.queued == 0 && s.fc.NextSegment(1, 1, s.c.maxPay) > 0 && !s.rcvFullLocked()
}
