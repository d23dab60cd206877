package shm

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wait"
)

// Endpoint data, version 1 (little-endian, 40 bytes):
//
//	0  magic "SDPE"   4 version   8 pid   12 QP number   16 nonce (uint64)
//	24 control area size   28 ring size   32 max message size   36 file count
//
// Files: the control memfd, a duplicate of the eventfd, and the peer's end
// of the side channel. A receiver accepts only its own version and sizes.
const (
	epMagic   = 0x45504453 // "SDPE"
	epVersion = 1
	epSize    = 40
	epFiles   = 3
)

type endpointData struct {
	pid, qpn uint32
	nonce    uint64
}

func encodeEndpoint(q *queuePair) []byte {
	b := make([]byte, epSize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], epMagic)
	le.PutUint32(b[4:], epVersion)
	le.PutUint32(b[8:], uint32(unix.Getpid()))
	le.PutUint32(b[12:], q.num)
	le.PutUint64(b[16:], q.nonce)
	le.PutUint32(b[24:], ctlSize)
	le.PutUint32(b[28:], ringSize)
	le.PutUint32(b[32:], MaxMessageSize)
	le.PutUint32(b[36:], epFiles)
	return b
}

func decodeEndpoint(b []byte) (endpointData, error) {
	le := binary.LittleEndian
	if len(b) != epSize || le.Uint32(b[0:]) != epMagic {
		return endpointData{}, fmt.Errorf("shm: endpoint of %d bytes is not an shm endpoint: %w", len(b), verbs.ErrInvalid)
	}
	if v := le.Uint32(b[4:]); v != epVersion {
		return endpointData{}, fmt.Errorf("shm: endpoint version %d, want %d: %w", v, epVersion, verbs.ErrNotSupported)
	}
	if le.Uint32(b[24:]) != ctlSize || le.Uint32(b[28:]) != ringSize ||
		le.Uint32(b[32:]) != MaxMessageSize || le.Uint32(b[36:]) != epFiles {
		return endpointData{}, fmt.Errorf("shm: endpoint sizes differ from this build's: %w", verbs.ErrNotSupported)
	}
	return endpointData{pid: le.Uint32(b[8:]), qpn: le.Uint32(b[12:]), nonce: le.Uint64(b[16:])}, nil
}

// registry lists the queue pairs of this process whose Endpoint files are
// still their own, so that Connect can recognise an Endpoint passed
// directly between two queue pairs of one process.
var registry struct {
	mu      sync.Mutex
	byNonce map[uint64]*queuePair
}

var nextNonce atomic.Uint64

func registerEndpoint(q *queuePair) {
	registry.mu.Lock()
	if registry.byNonce == nil {
		registry.byNonce = make(map[uint64]*queuePair)
	}
	registry.byNonce[q.nonce] = q
	registry.mu.Unlock()
}

// unregisterEndpoint forgets q and closes the Endpoint files it still owns.
func unregisterEndpoint(q *queuePair) {
	registry.mu.Lock()
	delete(registry.byNonce, q.nonce)
	give := q.give
	q.give = nil
	registry.mu.Unlock()
	closeFDs(give)
}

// adoptFiles returns remote.Files, now owned by the caller. When they are
// the very descriptors a queue pair of this process handed out in its
// Endpoint (a direct, in-process connect), that queue pair stops owning
// them, so each descriptor has exactly one owner.
func adoptFiles(remote verbs.Endpoint, ed endpointData) []int {
	if ed.pid != uint32(unix.Getpid()) {
		return remote.Files
	}
	registry.mu.Lock()
	if peer := registry.byNonce[ed.nonce]; peer != nil && slices.Equal(peer.give, remote.Files) {
		peer.give = nil
	}
	registry.mu.Unlock()
	return remote.Files
}

// LocalEndpoint returns the queue pair's description. Its Files remain
// owned by the queue pair; after they were handed directly to a queue pair
// of this process, LocalEndpoint fails with ErrInvalid.
func (q *queuePair) LocalEndpoint() (verbs.Endpoint, error) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if verbs.QPState(q.state.Load()) == verbs.QPClosed {
		return verbs.Endpoint{}, fmt.Errorf("shm: local endpoint of QP %d: %w", q.num, verbs.ErrClosed)
	}
	if q.give == nil {
		return verbs.Endpoint{}, fmt.Errorf("shm: local endpoint of QP %d: files already taken by a connected queue pair: %w", q.num, verbs.ErrInvalid)
	}
	return verbs.Endpoint{Data: slices.Clone(q.epData), Files: slices.Clone(q.give)}, nil
}

// Connect validates the peer's Endpoint, maps its control area, and starts
// the NIC goroutine. It owns remote.Files from the start: it keeps the
// eventfd and the side channel and closes everything else, also on error.
func (q *queuePair) Connect(remote verbs.Endpoint) error {
	noteFDs(remote.Files...)
	ed, err := decodeEndpoint(remote.Data)
	if err != nil {
		closeFDs(remote.Files)
		return err
	}
	files := adoptFiles(remote, ed)
	if len(files) != epFiles {
		closeFDs(files)
		return fmt.Errorf("shm: endpoint with %d files, want %d: %w", len(files), epFiles, verbs.ErrInvalid)
	}
	ctlFD, peerEfd, rx := files[0], files[1], files[2]
	mem, err := mapPeerMemfd(ctlFD, ctlSize, true)
	closeRaw(ctlFD)
	if err == nil {
		err = checkEventfd(peerEfd)
	}
	if err == nil {
		err = checkSeqpacket(rx)
	}
	var peer area
	if err == nil {
		peer = newArea(mem)
		if !peer.headerValid() {
			err = fmt.Errorf("shm: peer control area header: %w", verbs.ErrInvalid)
		}
	}
	epfd := -1
	if err == nil {
		epfd, err = newNICEpoll(q.efd, rx)
	}
	if err == nil {
		err = q.attachPeer(peer, peerEfd, rx, epfd)
	}
	if err != nil {
		if mem != nil {
			unix.Munmap(mem)
		}
		closeFD(&epfd)
		closeFDs(files[1:])
		return fmt.Errorf("shm: connect QP %d to QP %d: %w", q.num, ed.qpn, err)
	}
	return nil
}

// attachPeer installs the peer's resources and moves an Init queue pair to
// QPReady.
func (q *queuePair) attachPeer(peer area, peerEfd, rx, epfd int) error {
	q.sqMu.Lock()
	defer q.sqMu.Unlock()
	q.rqMu.Lock()
	defer q.rqMu.Unlock()
	q.annMu.Lock()
	defer q.annMu.Unlock()
	if s := verbs.QPState(q.state.Load()); s != verbs.QPInit {
		if s == verbs.QPClosed {
			return verbs.ErrClosed
		}
		return fmt.Errorf("queue pair is %v: %w", s, verbs.ErrInvalid)
	}
	q.peer, q.peerEfd, q.rx, q.epfd = peer, peerEfd, rx, epfd
	q.epPark = wait.NewParkFD(epfd, q.nicReady)
	q.state.Store(uint32(verbs.QPReady))
	q.my.state.Store(wireReady)
	q.ringPeer()
	q.startNIC()
	return nil
}

// newNICEpoll creates the NIC goroutine's epoll set: its own eventfd and
// the side channel.
func newNICEpoll(efd, rx int) (int, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("epoll_create1: %w", err)
	}
	noteFDs(epfd)
	add := func(fd int, events uint32) error {
		return unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: events, Fd: int32(fd)})
	}
	if err := add(efd, unix.EPOLLIN); err != nil {
		closeRaw(epfd)
		return -1, fmt.Errorf("epoll add eventfd: %w", err)
	}
	if err := add(rx, unix.EPOLLIN|unix.EPOLLRDHUP); err != nil {
		closeRaw(epfd)
		return -1, fmt.Errorf("epoll add side channel: %w", err)
	}
	return epfd, nil
}
