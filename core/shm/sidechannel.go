package shm

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// The side channel is a SOCK_SEQPACKET unix socket pair per queue pair.
// The queue pair keeps one end and sends region announcements on it; the
// other end travels in its Endpoint, and the peer reads announcements from
// it and watches it for EOF, which means the queue pair (or its process) is
// gone. An announcement is one 32-byte message:
//
//	0  kind    uint32 (annAdd with the memfd as SCM_RIGHTS, or annRemove)
//	4  key     uint32
//	8  length  uint64
//	16 access  uint32 (verbs.Access)
//	20 reserved
//
// The epoch word of the owner's control area counts announcements made.
// It is bumped once the message is in the socket, or, when the socket is
// full (a peer that has not connected yet holds only a few hundred
// messages), in the owner's backlog, which the owner's NIC goroutine
// flushes as the peer drains. A peer compares the count with the messages
// it received: equal means it knows every region; behind means it must
// drain, and, for a key it needs, wait briefly for the rest.
const (
	annAdd    = 1
	annRemove = 2
	annSize   = 32

	maxRemoteRegions = 1 << 16
)

// announcement is a message waiting in the backlog; fd is a duplicate of
// the region's memfd owned by the backlog, or -1.
type announcement struct {
	msg [annSize]byte
	fd  int
}

// announce tells the peer about region r (kind annAdd or annRemove). The
// caller holds Provider.mu, which orders announcements. It never blocks.
func (q *queuePair) announce(kind uint32, r *region) {
	a := announcement{fd: -1}
	binary.LittleEndian.PutUint32(a.msg[0:], kind)
	binary.LittleEndian.PutUint32(a.msg[4:], r.key)
	binary.LittleEndian.PutUint64(a.msg[8:], uint64(r.size))
	binary.LittleEndian.PutUint32(a.msg[16:], uint32(r.access))
	q.annMu.Lock()
	defer q.annMu.Unlock()
	if len(q.backlog) == 0 {
		err := sendAnnouncement(q.keep, &a, r.fd)
		if err != unix.EAGAIN {
			q.my.epoch.Add(1)
			return
		}
	}
	if kind == annAdd {
		fd, err := unix.FcntlInt(uintptr(r.fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			q.requestFail() // out of descriptors: the peer would miss the region
			return
		}
		noteFDs(fd)
		a.fd = fd
	}
	q.backlog = append(q.backlog, a)
	q.my.epoch.Add(1)
	q.flushBacklogLocked()
}

// sendAnnouncement sends one message without blocking, with fd attached
// when the message adds a region. A peer that is gone (EPIPE) counts as
// sent: its queue pair notices EOF on its own.
func sendAnnouncement(sock int, a *announcement, fd int) error {
	var oob []byte
	if binary.LittleEndian.Uint32(a.msg[0:]) == annAdd {
		oob = unix.UnixRights(fd)
	}
	for {
		_, err := unix.SendmsgN(sock, a.msg[:], oob, nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
		switch err {
		case unix.EINTR:
			continue
		case nil, unix.EAGAIN:
			return err
		}
		return nil
	}
}

// flushBacklogLocked sends backlogged announcements while the socket takes
// them, and has the NIC goroutine watch the socket for room while some
// remain. The caller holds annMu.
func (q *queuePair) flushBacklogLocked() {
	for len(q.backlog) > 0 {
		a := &q.backlog[0]
		if sendAnnouncement(q.keep, a, a.fd) == unix.EAGAIN {
			break
		}
		closeFD(&a.fd)
		q.backlog = q.backlog[1:]
	}
	if len(q.backlog) == 0 {
		q.backlog = nil
	}
	watch := len(q.backlog) > 0
	if q.epfd < 0 || watch == q.keepWatched {
		return
	}
	op := unix.EPOLL_CTL_DEL
	if watch {
		op = unix.EPOLL_CTL_ADD
	}
	ev := unix.EpollEvent{Events: unix.EPOLLOUT, Fd: int32(q.keep)}
	if unix.EpollCtl(q.epfd, op, q.keep, &ev) == nil {
		q.keepWatched = watch
	}
}

// flushBacklog is flushBacklogLocked for the NIC goroutine.
func (q *queuePair) flushBacklog() {
	q.annMu.Lock()
	q.flushBacklogLocked()
	q.annMu.Unlock()
}

// dropBacklog releases the backlog at Close.
func (q *queuePair) dropBacklog() {
	for i := range q.backlog {
		closeFD(&q.backlog[i].fd)
	}
	q.backlog = nil
}
