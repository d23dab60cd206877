package mux

import (
	"math"

	"github.com/sdpshim/sdpshim/core/wire"
)

// Socket buffer sizes (SO_RCVBUF, SO_SNDBUF) as limits on a stream, as
// the kernel's TCP has them: a writer gets at most its send buffer plus
// the reader's receive buffer ahead of a reader that does not read, and
// only when both were set by the programs (the kernel grows either one by
// itself otherwise, to megabytes, so nothing the channel holds is more).
//
// The receiving end announces its receive buffer with a ControlRcvBuf
// record (SetRcvBuf); the sending end, when its own send buffer is set
// (SetSendBuf), then keeps at most the sum in blocks the receiver holds,
// rounded up to whole blocks, and sends blocks no larger than that, so a
// sum below one block's payload holds one block of at most that size.
// For a buffered (coalescing) flow controller the send buffer is what a
// Write may copy into the stream instead of the channel's SendBuffer, and
// the blocks hold the receive buffer's worth. The held-block count needs a
// transport that counts held blocks (BlockCounter); on others the limit
// is announced but not enforced.

// SetRcvBuf announces this end's receive buffer, n bytes (0: no limit),
// to the peer's sending side. Announcing the value already announced
// does nothing.
func (s *Stream) SetRcvBuf(n int) {
	n = max(0, min(n, math.MaxInt32))
	s.mu.Lock()
	if n == s.rcvBuf || s.err != nil || s.closed {
		s.mu.Unlock()
		return
	}
	s.rcvBuf = n
	s.ctrlOut = append(s.ctrlOut, wire.ControlRecord{Kind: wire.ControlRcvBuf, Value: uint32(n)})
	s.activateLocked()
	s.mu.Unlock()
	s.c.flush()
}

// SetSendBuf sets the bytes a buffered controller's Writes may copy into
// the stream (0: the channel's SendBuffer).
func (s *Stream) SetSendBuf(n int) {
	s.mu.Lock()
	s.sendBuf = max(0, n)
	s.ev.signal()
	s.mu.Unlock()
}

// PeerRcvBuf returns the receive buffer the peer announced, 0 if none.
func (s *Stream) PeerRcvBuf() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peerRcv
}

// sendBufLocked returns the copy limit of a buffered controller.
//
// +checklocks:s.mu
func (s *Stream) sendBufLocked() int {
	if s.sendBuf > 0 {
		return s.sendBuf
	}
	return s.c.cfg.SendBuffer
}

// rcvLimitLocked returns how many held blocks the buffers allow (0: no
// limit) and the largest data block they allow.
//
// +checklocks:s.mu
func (s *Stream) rcvLimitLocked(maxPay int) (blocks, pay int) {
	if s.peerRcv <= 0 || s.sendBuf <= 0 {
		return 0, maxPay
	}
	lim := s.peerRcv
	if !s.fc.Buffered() {
		lim += s.sendBuf
	}
	pay = min(maxPay, lim)
	return max(1, (lim+maxPay-1)/maxPay), pay
}

// rcvFullLocked reports whether the stream holds every block the peer's
// receive buffer allows, in the transport's view refreshed once when it
// looks full (a Write would wait: no writability to report).
//
// +checklocks:s.mu
func (s *Stream) rcvFullLocked() bool {
	c := s.c
	limit, _ := s.rcvLimitLocked(c.maxPay)
	if limit == 0 || c.counter == nil {
		return false
	}
	if n, _ := c.counter.Held(s.id); n < limit {
		return false
	}
	n, err := c.heldRefreshed(s)
	return err == nil && n >= limit // an error reaches the caller through the stream
}

// heldRefreshed returns the blocks of s the transport holds, in its view
// refreshed now: a count from the view as it was, which learns of freed
// blocks only when it reads the receiver's status, may be stale where it
// reached a limit.
func (c *Channel) heldRefreshed(s *Stream) (int, error) {
	if err := c.counter.Refresh(); err != nil {
		return 0, err
	}
	n, _ := c.counter.Held(s.id)
	return n, nil
}
