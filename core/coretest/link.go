package coretest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// A link is the coordination channel between the two sides of a case: one
// end of a unix stream socketpair, shared by the two goroutines of an
// in-process run or inherited by the peer process of a cross-process run.
// Messages are framed as a 4-byte little-endian length, a kind byte and a
// payload; endpoints travel as verbs.SendEndpoint messages announced by a
// kindEndpoint frame. Every read waits with poll(2) up to the side's
// deadline, so a side whose partner died or hung fails instead of hanging.
type link struct {
	fd       int
	deadline time.Time
}

// Message kinds. A receiver names the kind it expects, so two sides that
// disagree about the protocol fail at the first message, not later.
const (
	kindStep     byte = iota + 1 // a named step: payload is the name
	kindWords                    // little-endian uint64 values
	kindRegion                   // a verbs.RemoteRegion
	kindEndpoint                 // a verbs.SendEndpoint message follows
	kindHello                    // deadline and seed, suite to peer
)

// maxFrame bounds one frame so a corrupt stream cannot allocate without
// limit.
const maxFrame = 1 << 20

var errLinkClosed = errors.New("link closed by the other side (see its failure)")

func newLinkPair() (a, b int, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, -1, fmt.Errorf("socketpair: %w", err)
	}
	return fds[0], fds[1], nil
}

func (l *link) close() {
	if l.fd >= 0 {
		unix.Close(l.fd)
		l.fd = -1
	}
}

func (l *link) send(kind byte, payload []byte) error {
	if l.fd < 0 {
		return errLinkClosed
	}
	msg := make([]byte, 5+len(payload))
	binary.LittleEndian.PutUint32(msg, uint32(len(payload)))
	msg[4] = kind
	copy(msg[5:], payload)
	for len(msg) > 0 {
		n, err := unix.SendmsgN(l.fd, msg, nil, nil, unix.MSG_NOSIGNAL)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("link send: %w", err)
		}
		msg = msg[n:]
	}
	return nil
}

func (l *link) recv(kind byte) ([]byte, error) {
	hdr := make([]byte, 5)
	if err := l.readFull(hdr); err != nil {
		return nil, err
	}
	size := binary.LittleEndian.Uint32(hdr)
	if size > maxFrame {
		return nil, fmt.Errorf("link: frame of %d bytes", size)
	}
	payload := make([]byte, size)
	if err := l.readFull(payload); err != nil {
		return nil, err
	}
	if hdr[4] != kind {
		return nil, fmt.Errorf("link: got message kind %d (%q), want kind %d", hdr[4], payload, kind)
	}
	return payload, nil
}

// waitReadable waits until the link has data or EOF, up to the deadline.
func (l *link) waitReadable() error {
	if l.fd < 0 {
		return errLinkClosed
	}
	for {
		ms := msUntil(l.deadline)
		if ms == 0 {
			return fmt.Errorf("link: deadline %v passed waiting for the other side", l.deadline.Format(time.TimeOnly))
		}
		pfd := []unix.PollFd{{Fd: int32(l.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("link poll: %w", err)
		}
		if n > 0 {
			return nil
		}
	}
}

func (l *link) readFull(p []byte) error {
	for got := 0; got < len(p); {
		if err := l.waitReadable(); err != nil {
			return err
		}
		n, err := unix.Read(l.fd, p[got:])
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err != nil {
			return fmt.Errorf("link read: %w", err)
		}
		if n == 0 {
			return errLinkClosed
		}
		got += n
	}
	return nil
}

func (l *link) sendStep(name string) error { return l.send(kindStep, []byte(name)) }

func (l *link) recvStep(name string) error {
	p, err := l.recv(kindStep)
	if err != nil {
		return fmt.Errorf("waiting for step %q: %w", name, err)
	}
	if string(p) != name {
		return fmt.Errorf("got step %q, want %q", p, name)
	}
	return nil
}

func (l *link) sendWords(kind byte, v ...uint64) error {
	p := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(p[8*i:], x)
	}
	return l.send(kind, p)
}

func (l *link) recvWords(kind byte) ([]uint64, error) {
	p, err := l.recv(kind)
	if err != nil {
		return nil, err
	}
	if len(p)%8 != 0 {
		return nil, fmt.Errorf("link: %d bytes is not a list of words", len(p))
	}
	v := make([]uint64, len(p)/8)
	for i := range v {
		v[i] = binary.LittleEndian.Uint64(p[8*i:])
	}
	return v, nil
}

func (l *link) sendRegion(r verbs.RemoteRegion) error {
	return l.sendWords(kindRegion, uint64(r.Key), r.Addr, r.Len)
}

func (l *link) recvRegion() (verbs.RemoteRegion, error) {
	v, err := l.recvWords(kindRegion)
	if err != nil {
		return verbs.RemoteRegion{}, err
	}
	if len(v) != 3 || v[0] > math.MaxUint32 {
		return verbs.RemoteRegion{}, fmt.Errorf("link: malformed region %v", v)
	}
	return verbs.RemoteRegion{Key: uint32(v[0]), Addr: v[1], Len: v[2]}, nil
}

func (l *link) sendEndpoint(ep verbs.Endpoint) error {
	if err := l.send(kindEndpoint, nil); err != nil {
		return err
	}
	return verbs.SendEndpoint(l.fd, ep)
}

func (l *link) recvEndpoint() (verbs.Endpoint, error) {
	if _, err := l.recv(kindEndpoint); err != nil {
		return verbs.Endpoint{}, err
	}
	if err := l.waitReadable(); err != nil {
		return verbs.Endpoint{}, err
	}
	return verbs.RecvEndpoint(l.fd)
}

// msUntil returns the milliseconds left until deadline, clamped to
// [0, 1000] so that a long wait rechecks the clock; 0 means it passed.
func msUntil(deadline time.Time) int {
	left := time.Until(deadline)
	if left <= 0 {
		return 0
	}
	return int(min(max(left.Milliseconds(), 1), 1000))
}
