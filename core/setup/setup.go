package setup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/random"
	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wire"
)

// SetupVersion is the version of the setup exchange and of everything it
// agrees on (block header, transport layouts). Both sides must speak the
// same one.
const SetupVersion = 1

// Errors of Establish, besides those of the provider and the socket.
var (
	// ErrVersion: the peer speaks another setup version.
	ErrVersion = errors.New("setup version mismatch")
	// ErrMismatch: the two sides' SetupConfig disagree.
	ErrMismatch = errors.New("setup configuration mismatch")
)

// SetupConfig is what Establish agrees on with the peer, plus this side's
// queue pair limits. Transport, Flow, Blocks, BlockSize and the provider's
// name must be equal on both sides, or Establish fails with ErrMismatch.
type SetupConfig struct {
	Transport string // "statusbyte", "slidingwindow"; 1 to 32 printable bytes
	Flow      string // flow controller name; 0 to 32 printable bytes
	Blocks    int    // blocks per direction, 1..MaxBlocks
	BlockSize int    // bytes per block, header included, HeaderSize+1..MaxBlockSize

	// Local queue pair limits; zero picks the default.
	MaxSend   int // data queue pair send queue (default 256)
	MaxRings  int // doorbell queue pair send and receive queues (default 64)
	MaxInline int // inline bytes (default 64, at least 8)
}

// Bounds of SetupConfig.
const (
	MaxBlocks    = 4096
	MaxBlockSize = 1 << 20
	maxNameLen   = 32
	maxBlobLen   = 4096
)

func (c *SetupConfig) check() error {
	bad := func(f string, v any) error {
		return fmt.Errorf("setup config: %s %v: %w", f, v, verbs.ErrInvalid)
	}
	switch {
	case !validName(c.Transport) || c.Transport == "":
		return bad("transport", fmt.Sprintf("%q", c.Transport))
	case !validName(c.Flow):
		return bad("flow", fmt.Sprintf("%q", c.Flow))
	case c.Blocks < 1 || c.Blocks > MaxBlocks:
		return bad("blocks", c.Blocks)
	case c.BlockSize <= wire.HeaderSize || c.BlockSize > MaxBlockSize:
		return bad("block size", c.BlockSize)
	case c.MaxSend < 0 || c.MaxRings < 0 || c.MaxInline < 0 || (c.MaxInline > 0 && c.MaxInline < 8):
		return bad("queue limits", fmt.Sprintf("%d/%d/%d", c.MaxSend, c.MaxRings, c.MaxInline))
	}
	return nil
}

func (c *SetupConfig) defaults() {
	if c.MaxSend == 0 {
		c.MaxSend = 256
	}
	if c.MaxRings == 0 {
		c.MaxRings = 64
	}
	if c.MaxInline == 0 {
		c.MaxInline = 64
	}
}

func validName(s string) bool {
	if len(s) > maxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// Establish connects this process to the peer at the other end of the
// connected unix stream socket fd: both sides call it with their own
// provider, a config that must agree, and an opaque transport blob (at
// most 4096 bytes; typically the RemoteRegions the peer will address),
// which the other side gets back. It creates the Link's queue pairs and
// completion queues, swaps endpoints, versions, configs and blobs over fd
// (verbs.SendEndpoint messages), checks them and connects. Regions the
// blob names must be registered before the call.
//
// It returns ErrVersion or ErrMismatch (with the differences named) when
// the sides disagree, os.ErrDeadlineExceeded when the peer does not answer
// by deadline (zero: none), and closes everything it created on error.
// fd stays open and owned by the caller; it carries nothing after the call.
func Establish(fd int, p verbs.Provider, cfg SetupConfig, blob []byte, deadline time.Time) (*Link, []byte, error) {
	if err := cfg.check(); err != nil {
		return nil, nil, err
	}
	if len(blob) > maxBlobLen {
		return nil, nil, fmt.Errorf("setup: blob of %d bytes: %w", len(blob), verbs.ErrInvalid)
	}
	cfg.defaults()
	l, err := newLink(p, cfg)
	if err != nil {
		return nil, nil, err
	}
	peerBlob, err := l.handshake(fd, p.Name(), cfg, blob, deadline)
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	return l, peerBlob, nil
}

// handshake swaps hellos over fd and connects the queue pairs.
func (l *Link) handshake(fd int, provider string, cfg SetupConfig, blob []byte, deadline time.Time) ([]byte, error) {
	var nonce [8]byte
	if err := random.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("setup: nonce: %w", err)
	}
	var eps [2]verbs.Endpoint
	for i, qp := range []verbs.QueuePair{l.Data, l.Bell} {
		ep, err := qp.LocalEndpoint()
		if err != nil {
			return nil, fmt.Errorf("setup: local endpoint: %w", err)
		}
		eps[i] = ep
	}
	mine := hello{
		nonce: binary.LittleEndian.Uint64(nonce[:]), transport: cfg.Transport, flow: cfg.Flow,
		provider: provider, blocks: uint32(cfg.Blocks), blockSize: uint32(cfg.BlockSize),
		eps: eps, blob: blob,
	}
	sent := make(chan error, 1)
	go func() { sent <- verbs.SendEndpoint(fd, mine.encode()) }()
	theirs, err := recvHello(fd, deadline)
	if serr := <-sent; err == nil && serr != nil {
		err = fmt.Errorf("setup: %w", serr)
	}
	if err != nil {
		return nil, err
	}
	files := theirs.files
	defer func() { closeAll(files) }()
	if err := mine.agree(&theirs); err != nil {
		return nil, err
	}
	l.Initiator = mine.nonce > theirs.nonce
	l.PeerProvider = theirs.provider
	for i, qp := range []verbs.QueuePair{l.Data, l.Bell} {
		ep := theirs.eps[i]
		files = files[len(ep.Files):] // Connect owns them from here
		if err := qp.Connect(ep); err != nil {
			return nil, fmt.Errorf("setup: connect: %w", err)
		}
	}
	return theirs.blob, nil
}

// recvHello waits for the peer's hello until deadline and decodes it.
func recvHello(fd int, deadline time.Time) (hello, error) {
	if err := waitReadable(fd, deadline); err != nil {
		return hello{}, err
	}
	ep, err := verbs.RecvEndpoint(fd)
	if err != nil {
		return hello{}, fmt.Errorf("setup: %w", err)
	}
	h, err := decodeHello(ep)
	if err != nil {
		closeAll(ep.Files)
		return hello{}, err
	}
	return h, nil
}

// waitReadable polls fd until it is readable (or at EOF) or deadline.
func waitReadable(fd int, deadline time.Time) error {
	for {
		ms := -1
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return fmt.Errorf("setup: waiting for the peer: %w", os.ErrDeadlineExceeded)
			}
			ms = int(min(left.Milliseconds()+1, 1000))
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("setup: poll: %w", err)
		}
		if n > 0 {
			return nil
		}
	}
}

// closeAll closes descriptors received with a hello that the setup will
// not keep.
func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
