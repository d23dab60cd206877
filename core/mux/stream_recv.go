package mux

import (
	"errors"
	"fmt"
	"math"

	"github.com/sdpshim/sdpshim/core/wire"
)

// deliverLocked takes one arrived block of the stream: control blocks go
// to the flow controller in their own order, a reset takes effect at once,
// data and FIN blocks are put in order. It returns an error (wrapping
// ErrProtocol) for a block the peer could not legitimately send.
//
// +checklocks:s.mu
func (s *Stream) deliverLocked(b wire.Block) error {
	c := s.c
	if s.err != nil || s.deleted {
		c.release(b)
		return nil
	}
	if b.Flags == wire.FlagControl {
		return s.controlLocked(b)
	}
	d := int32(b.Seq - s.rxNext)
	if d < 0 || d >= seqWindow {
		c.release(b)
		return fmt.Errorf("stream %d: block %d, expecting %d: %w", s.id, b.Seq, s.rxNext, wire.ErrProtocol)
	}
	if b.Flags&wire.FlagReset == 0 && b.Len > 0 {
		if err := s.fc.Arrived(int(b.Len)); err != nil {
			c.release(b)
			return fmt.Errorf("stream %d: %s: %w", s.id, s.fc.Name(), err)
		}
	}
	switch {
	case s.resetIn:
		c.release(b)
		return nil
	case b.Flags == wire.FlagReset:
		c.release(b)
		s.onResetLocked()
		return nil
	case s.finIn:
		c.release(b)
		return fmt.Errorf("stream %d: block %d after FIN: %w", s.id, b.Seq, wire.ErrProtocol)
	case d > 0:
		if _, dup := s.rxHold[b.Seq]; dup {
			c.release(b)
			return fmt.Errorf("stream %d: block %d twice: %w", s.id, b.Seq, wire.ErrProtocol)
		}
		s.rxHold[b.Seq] = b
		return nil
	}
	s.acceptLocked(b)
	for !s.resetIn && len(s.rxHold) > 0 {
		nb, ok := s.rxHold[s.rxNext]
		if !ok {
			break
		}
		delete(s.rxHold, s.rxNext)
		if s.finIn {
			c.release(nb)
			return fmt.Errorf("stream %d: block %d after FIN: %w", s.id, nb.Seq, wire.ErrProtocol)
		}
		s.acceptLocked(nb)
	}
	return nil
}

// acceptLocked appends the next in-order data or FIN block.
//
// +checklocks:s.mu
func (s *Stream) acceptLocked(b wire.Block) {
	c := s.c
	s.rxNext++
	fin := b.Flags&wire.FlagFIN != 0
	switch {
	case s.closed:
		// Nobody reads any more: data to a closed socket resets the peer.
		c.release(b)
		if b.Len > 0 && s.resetOut == finNone {
			s.resetOut = finQueued
			s.activateLocked()
			c.pumpReq.Store(true)
		}
	case b.Len > 0:
		s.rxq = append(s.rxq, b)
		s.rxBytes += int(b.Len)
		if c.ret != nil && c.cfg.RetainAfter > 0 && len(s.rxq) > c.cfg.RetainAfter {
			c.ret.Retain(b)
		}
	default:
		c.release(b)
	}
	if fin {
		s.finIn = true
		s.maybeDeleteLocked()
	}
	s.ev.signal()
}

// onResetLocked applies the peer's reset: unread data is discarded (as
// TCP does on RST), and the peer gets a reset back unless this side's
// final block went already, so that both ends can forget the stream.
//
// +checklocks:s.mu
func (s *Stream) onResetLocked() {
	s.resetIn = true
	s.dropRxLocked()
	s.dropHeldLocked()
	if s.finOut != finSent && s.resetOut == finNone {
		s.resetOut = finQueued
		s.activateLocked()
		s.c.pumpReq.Store(true)
	}
	s.maybeDeleteLocked()
	s.ev.signal()
}

// controlLocked applies control blocks in their sequence order.
//
// +checklocks:s.mu
func (s *Stream) controlLocked(b wire.Block) error {
	c := s.c
	d := int32(b.Seq - s.ctrlNext)
	if d < 0 || d >= seqWindow {
		c.release(b)
		return fmt.Errorf("stream %d: control block %d, expecting %d: %w", s.id, b.Seq, s.ctrlNext, wire.ErrProtocol)
	}
	if d > 0 {
		if _, dup := s.ctrlHold[b.Seq]; dup {
			c.release(b)
			return fmt.Errorf("stream %d: control block %d twice: %w", s.id, b.Seq, wire.ErrProtocol)
		}
		s.ctrlHold[b.Seq] = b
		return nil
	}
	for {
		if err := s.applyControlLocked(b); err != nil {
			return err
		}
		nb, ok := s.ctrlHold[s.ctrlNext]
		if !ok {
			return nil
		}
		delete(s.ctrlHold, s.ctrlNext)
		b = nb
	}
}

// applyControlLocked hands one control block's records to the flow
// controller.
//
// +checklocks:s.mu
func (s *Stream) applyControlLocked(b wire.Block) error {
	c := s.c
	s.ctrlNext++
	recs, err := wire.DecodeControl(c.ctrlBuf[:0], b.Payload)
	c.release(b)
	c.ctrlBuf = recs[:0]
	if err != nil {
		return fmt.Errorf("stream %d: %w", s.id, err)
	}
	for _, r := range recs {
		if r.Kind == wire.ControlRcvBuf {
			s.peerRcv = int(min(r.Value, math.MaxInt32))
			continue
		}
		if err := s.fc.OnControl(r); err != nil {
			if !errors.Is(err, wire.ErrProtocol) {
				err = fmt.Errorf("%w (%w)", err, wire.ErrProtocol)
			}
			return fmt.Errorf("stream %d: %s control record: %w", s.id, s.fc.Name(), err)
		}
	}
	if len(recs) > 0 {
		if s.queued > 0 || s.finOut == finQueued {
			c.pumpReq.Store(true)
		}
		s.ev.signal()
	}
	return nil
}
