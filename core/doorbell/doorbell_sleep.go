package doorbell

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/fdhook"
	"github.com/sdpshim/sdpshim/core/setup"
	"github.com/sdpshim/sdpshim/core/sharedmem"
	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/core/wire"
)

// Sleeping. Several goroutines may sleep on one side's bells; one of them
// at a time, the leader, arms the completion queue and polls its
// notification fd, the others wait on a channel that any goroutine
// draining completions closes when something changed. Only the leader
// (or anyone while there is no leader) consumes the fd's notification, so
// a leader never sleeps through a notification another goroutine ate.

// bellHandle is one waiter's Doorbell on the bells of mask.
type bellHandle struct {
	b     *Bells
	mask  uint8
	seen  [maxBells]uint64 // b.rung when armed
	ints  uint64           // b.ints when armed
	armed bool             // counted in b.armers
}

// rungLocked reports whether a bell of the handle rang since Arm.
//
// +checklocks:h.b.mu
func (h *bellHandle) rungLocked() bool {
	if h.b.ints != h.ints {
		return true
	}
	for id := range h.b.n {
		if h.mask&(1<<id) != 0 && h.b.rung[id] != h.seen[id] {
			return true
		}
	}
	return false
}

// Arm writes a fresh token for each of the handle's bells into the peer's
// board and returns once they are visible there.
func (h *bellHandle) Arm() error {
	b := h.b
	b.mu.Lock()
	b.drainLocked(!b.leader)
	h.seen, h.ints = b.rung, b.ints
	err := b.err
	b.mu.Unlock()
	if err != nil {
		return err
	}
	b.postMu.Lock()
	if !h.armed {
		h.armed = true
		b.armers++
	}
	for id := range b.n {
		if h.mask&(1<<id) != 0 && err == nil {
			err = b.writeLocked(id, b.tokens.Add(1))
		}
	}
	b.postMu.Unlock()
	if err != nil {
		b.mu.Lock()
		b.setErrLocked(fmt.Errorf("doorbell: arm: %w", err))
		err = b.err
		b.mu.Unlock()
		return err
	}
	sharedmem.Fence()
	return nil
}

// Disarm withdraws the arm; when no other handle of the bell is armed it
// clears the token at the peer so that its next progress does not ring.
func (h *bellHandle) Disarm() {
	b := h.b
	b.postMu.Lock()
	defer b.postMu.Unlock()
	if !h.armed {
		return
	}
	h.armed = false
	if b.armers--; b.armers == 0 {
		for id := range b.n {
			if h.mask&(1<<id) != 0 {
				b.writeLocked(id, 0) // an error ends the link; the next Arm reports it
			}
		}
	}
}

// unarm forgets the arm after a sleep: the peer rang for the token (or
// will ring once, spuriously).
func (h *bellHandle) unarm() {
	b := h.b
	b.postMu.Lock()
	if h.armed {
		h.armed = false
		b.armers--
	}
	b.postMu.Unlock()
}

// Sleep waits for a ring on the bell after Arm, the deadline, the end of
// the bells, or the backstop.
func (h *bellHandle) Sleep(deadline time.Time) error {
	defer h.unarm()
	b := h.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return b.err
	}
	b.active++
	defer func() {
		if b.active--; b.active == 0 && b.closed {
			b.quiet.Broadcast()
		}
	}()
	wakeBy := deadline
	if b.backstop > 0 {
		if bs := time.Now().Add(b.backstop); wakeBy.IsZero() || bs.Before(wakeBy) {
			wakeBy = bs
		}
	}
	for {
		b.drainLocked(!b.leader)
		switch {
		case h.rungLocked():
			return nil
		case b.err != nil:
			return b.err
		case passed(wakeBy):
			if passed(deadline) {
				return os.ErrDeadlineExceeded
			}
			return nil // backstop
		}
		if !b.leader {
			b.leadLocked(h, wakeBy)
			continue
		}
		w := b.wake
		b.mu.Unlock()
		waitChan(w, wakeBy)
		b.mu.Lock()
	}
}

// leadLocked makes the caller the leader for one poll of the notification
// fd, then hands leadership back and wakes the followers.
//
// +checklocks:b.mu
func (b *Bells) leadLocked(h *bellHandle, wakeBy time.Time) {
	b.leader = true
	b.mu.Unlock()
	armErr := b.link.BellRecvCQ.Arm()
	b.mu.Lock()
	if armErr != nil {
		b.setErrLocked(fmt.Errorf("doorbell: arm CQ: %w", armErr))
	}
	b.drainLocked(true)
	if !h.rungLocked() && b.err == nil {
		b.mu.Unlock()
		b.pollNotify(wakeBy)
		b.mu.Lock()
	}
	b.leader = false
	b.consumeKick()
	b.drainLocked(true)
	b.broadcastLocked()
}

// Interrupt ends every sleep in progress on the bells with nil, as a
// spurious wakeup: the sleepers check their conditions again (and may
// re-arm differently).
func (b *Bells) Interrupt() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.ints++
	b.broadcastLocked()
	if b.leader {
		b.kickLocked()
	}
}

// kickLocked wakes the leader's wait.
//
// +checklocks:b.mu
func (b *Bells) kickLocked() {
	if b.kickCh != nil {
		select {
		case b.kickCh <- struct{}{}:
		default:
		}
		return
	}
	unix.Write(b.kickFD, []byte{1, 0, 0, 0, 0, 0, 0, 0})
}

// consumeKick takes a kick left for the leader (kickLocked).
func (b *Bells) consumeKick() {
	if b.kickCh != nil {
		select {
		case <-b.kickCh:
		default:
		}
		return
	}
	var buf [8]byte
	unix.Read(b.kickFD, buf[:])
}

// closeKick releases the kick eventfd and the leader's epoll set.
func (b *Bells) closeKick() {
	fdhook.CloseFD(b.kickFD)
	if b.park != nil {
		b.park.Close()
	}
}

// pollNotify waits until the notification fd or the kick fd is readable
// (for an in-process queue: its notification channel or kickCh), or
// wakeBy (zero: no limit; long waits recheck every second).
func (b *Bells) pollNotify(wakeBy time.Time) {
	ms := 1000
	if !wakeBy.IsZero() {
		left := time.Until(wakeBy)
		if left <= 0 {
			return
		}
		ms = int(min((left+time.Millisecond-1)/time.Millisecond, 1000))
	}
	if b.notifyCh != nil {
		d := time.Duration(ms) * time.Millisecond
		if b.leadTimer == nil {
			b.leadTimer = time.NewTimer(d)
		} else {
			b.leadTimer.Reset(d)
		}
		select {
		case <-b.notifyCh:
		case <-b.kickCh:
		case <-b.leadTimer.C:
		}
		b.leadTimer.Stop()
		return
	}
	if b.park != nil {
		b.park.Wait(time.Now().Add(time.Duration(ms) * time.Millisecond)) // timeouts and errors: the caller re-checks
		return
	}
	fds := [2]unix.PollFd{
		{Fd: int32(b.link.BellRecvCQ.NotifyFD()), Events: unix.POLLIN},
		{Fd: int32(b.kickFD), Events: unix.POLLIN},
	}
	unix.Poll(fds[:], ms) // EINTR and timeouts: the caller re-checks
}

// newBellPark returns the leader's parking place: an epoll set of the
// notification fd and the kick fd (level-triggered: it polls readable
// while either is), waited on through the Go runtime's poller (ParkFD);
// nil when it cannot be made (pollNotify then uses poll(2)).
func newBellPark(notify, kick int, ready func(fd int) bool) *wait.ParkFD {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil
	}
	fdhook.NoteFDs(ep)
	for _, fd := range []int{notify, kick} {
		if unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}) != nil {
			fdhook.CloseFD(ep)
			return nil
		}
	}
	return wait.NewParkFD(ep, ready)
}

// parkReady is park's readiness check: whether the epoll set has events
// (taken without blocking, then discarded). Only the leader waits on park.
func (b *Bells) parkReady(fd int) bool {
	n, err := unix.EpollWait(fd, b.parkEv[:], 0)
	return n > 0 || (err != nil && err != unix.EINTR)
}

// drainLocked takes every completion of the doorbell receive queue,
// counts rings, reposts receives and notes the end (peer closed, peer
// gone, garbage). With ack it first consumes the fd's notification.
//
// +checklocks:b.mu
func (b *Bells) drainLocked(ack bool) {
	if b.closed {
		return
	}
	cq := b.link.BellRecvCQ
	if ack {
		cq.AckNotify()
	}
	changed := false
	for {
		n, err := cq.Poll(b.cbuf[:])
		for _, c := range b.cbuf[:n] {
			changed = true
			switch {
			case c.Status != verbs.StatusSuccess:
				b.setErrLocked(fmt.Errorf("doorbell: %w", setup.CompletionError(c)))
				continue
			case c.HasImm && c.Imm == closeImm:
				b.setErrLocked(fmt.Errorf("doorbell: closed by the peer: %w", wire.ErrPeerGone))
			case c.Op == verbs.OpRecvWithImm && c.Imm >= 1 && int(c.Imm) <= b.n:
				b.rung[c.Imm-1]++
			default:
				b.messageLocked(c)
			}
			if c.ID >= uint64(b.link.Rings()) {
				b.setErrLocked(fmt.Errorf("doorbell: completion of unknown receive %d: %w", c.ID, wire.ErrProtocol))
				continue
			}
			if err := b.postRecvLocked(c.ID); err != nil {
				b.setErrLocked(fmt.Errorf("doorbell: repost receive: %w", err))
			}
		}
		if err != nil {
			changed = true
			b.setErrLocked(fmt.Errorf("doorbell: poll: %w (%w)", err, wire.ErrPeerGone))
		}
		if n < len(b.cbuf) || err != nil {
			break
		}
	}
	if changed {
		b.broadcastLocked()
	}
}

// messageLocked hands an arrival that is not a ring to OnMessage.
//
// +checklocks:b.mu
func (b *Bells) messageLocked(c verbs.Completion) {
	if b.onMsg == nil {
		b.setErrLocked(fmt.Errorf("doorbell: %v with imm %#x: %w", c.Op, c.Imm, wire.ErrProtocol))
		return
	}
	var payload []byte
	if b.msgs != nil && c.Op == verbs.OpRecv && c.ID < uint64(b.link.Rings()) {
		n := min(int(c.ByteLen), MessageSize)
		off := b.msgOff + MessageSize*int(c.ID)
		payload = append([]byte(nil), b.msgs.Bytes()[off:off+n]...)
	}
	if err := b.onMsg(c, payload); err != nil {
		b.setErrLocked(fmt.Errorf("doorbell: message: %w", err))
	}
}

// +checklocks:b.mu
func (b *Bells) setErrLocked(err error) {
	if b.err == nil {
		b.err = err
	}
}

// +checklocks:b.mu
func (b *Bells) broadcastLocked() {
	close(b.wake)
	b.wake = make(chan struct{})
}

// Close tells the peer this side is closing (its sleepers wake with an
// error wrapping ErrPeerGone), ends this side's waits with ErrClosed and
// returns once no goroutine sleeps on the bells any more. The Link stays
// open: the caller closes it afterwards.
func (b *Bells) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.mu.Unlock()
	if b.link.Err() == nil {
		b.postMu.Lock()
		err := b.writeLocked(b.n, 1)
		b.postMu.Unlock()
		if err == nil {
			b.ring(0, 0, closeImm)
		}
	}
	b.mu.Lock()
	b.closed = true
	b.setErrLocked(fmt.Errorf("doorbell: %w", verbs.ErrClosed))
	b.broadcastLocked()
	b.kickLocked()
	for b.active > 0 {
		b.quiet.Wait()
	}
	b.mu.Unlock()
	b.closeKick()
	// A goroutine that left its sleep may still disarm: from now on that
	// writes nothing (the caller unmaps the scratch region next).
	b.postMu.Lock()
	b.gone.Store(true)
	b.postMu.Unlock()
	return nil
}

// waitChan waits for w to close or until wakeBy (zero: no limit).
func waitChan(w <-chan struct{}, wakeBy time.Time) {
	if wakeBy.IsZero() {
		<-w
		return
	}
	t := time.NewTimer(time.Until(wakeBy))
	select {
	case <-w:
	case <-t.C:
	}
	t.Stop()
}

func passed(t time.Time) bool { return !t.IsZero() && !time.Now().Before(t) }
