package shm

import (
	"encoding/binary"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/fdhook"
	"github.com/sdpshim/sdpshim/core/verbs"
)

// remoteRegion is the local mapping of a peer's region.
type remoteRegion struct {
	mem    []byte
	length uint64
	access verbs.Access
}

// annWait bounds how long a request naming an unknown key waits for
// announcements the peer has counted but not yet delivered.
const annWait = 2 * time.Second

// announcementsPending reports whether the peer has announced regions this
// side has not received yet (a cheap check before requests run).
func (q *queuePair) announcementsPending() bool {
	return q.peer.epoch.Load() != q.annRecv.Load()
}

// awaitAnnouncements drains the side channel and, while the peer's count
// says more announcements are on their way, waits for them (bounded). The
// caller holds sqMu.
func (q *queuePair) awaitAnnouncements() {
	q.drainAnnouncements()
	deadline := time.Now().Add(annWait)
	for q.announcementsPending() && time.Now().Before(deadline) {
		q.flushBacklog() // the peer may be waiting for ours in the same way
		if q.rx >= 0 {
			pfd := []unix.PollFd{{Fd: int32(q.rx), Events: unix.POLLIN}}
			unix.Poll(pfd, 10)
		}
		if gone, bad := q.drainAnnouncements(); gone || bad {
			return
		}
	}
}

// drainAnnouncements applies every announcement queued on the side
// channel without blocking. gone reports EOF (the peer is gone); bad
// reports a malformed announcement, after which the channel is useless and
// the queue pair has been asked to fail. The caller holds sqMu, which
// guards the remote-region table and the side channel's receiving end.
func (q *queuePair) drainAnnouncements() (gone, bad bool) {
	if q.rx < 0 {
		return false, false
	}
	var buf [annSize + 1]byte
	var oob [64]byte
	for {
		n, oobn, flags, _, err := unix.Recvmsg(q.rx, buf[:], oob[:], unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			return false, false
		}
		if err != nil {
			return true, false
		}
		fds, perr := fdhook.Rights(oob[:oobn])
		ok := perr == nil
		noteFDs(fds...)
		if n == 0 && oobn == 0 {
			return true, false
		}
		if !ok || n != annSize || flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 || !q.applyAnnouncement(buf[:annSize], fds) {
			closeFDs(fds)
			q.requestFail()
			return false, true
		}
		q.annRecv.Add(1)
	}
}

// applyAnnouncement maps or unmaps a peer region; it takes ownership of
// fds only when it returns true.
func (q *queuePair) applyAnnouncement(msg []byte, fds []int) bool {
	kind := binary.LittleEndian.Uint32(msg[0:])
	key := binary.LittleEndian.Uint32(msg[4:])
	length := binary.LittleEndian.Uint64(msg[8:])
	access := verbs.Access(binary.LittleEndian.Uint32(msg[16:]))
	var rr *remoteRegion
	switch {
	case kind == annRemove && len(fds) == 0:
	case kind == annAdd && len(fds) == 1 && access&^accessAll == 0:
		mem, err := mapPeerMemfd(fds[0], length, access&verbs.AccessRemoteWrite != 0)
		if err != nil {
			return false
		}
		closeRaw(fds[0])
		rr = &remoteRegion{mem: mem, length: length, access: access}
	default:
		return false
	}
	old := q.remote[key]
	if rr == nil {
		delete(q.remote, key)
	} else if old == nil && len(q.remote) >= maxRemoteRegions {
		unix.Munmap(rr.mem)
		return true // over the limit: the region stays unknown (remote access errors)
	} else {
		q.remote[key] = rr
	}
	q.lastRemote = nil
	// No one uses old: users hold sqMu, as the caller does.
	if old != nil {
		unix.Munmap(old.mem)
	}
	return true
}
