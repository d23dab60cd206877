package verbs

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/fdhook"
)

// MaxEndpointData and MaxEndpointFiles bound an Endpoint on the wire so a
// hostile peer cannot make the receiver allocate without limit.
const (
	MaxEndpointData  = 64 << 10
	MaxEndpointFiles = 64
)

// SendEndpoint writes ep to the connected unix stream socket fd as one
// message: a 4-byte little-endian length, the data, and the files as
// SCM_RIGHTS. The caller keeps ownership of ep.Files.
func SendEndpoint(fd int, ep Endpoint) error {
	if len(ep.Data) > MaxEndpointData || len(ep.Files) > MaxEndpointFiles {
		return fmt.Errorf("send endpoint: %d bytes, %d files: %w", len(ep.Data), len(ep.Files), ErrInvalid)
	}
	msg := make([]byte, 4+len(ep.Data))
	binary.LittleEndian.PutUint32(msg, uint32(len(ep.Data)))
	copy(msg[4:], ep.Data)
	var oob []byte
	if len(ep.Files) > 0 {
		oob = unix.UnixRights(ep.Files...)
	}
	// The rights travel with the first byte; the rest may follow in
	// further writes.
	n, err := sendmsgRetry(fd, msg, oob)
	if err != nil {
		return fmt.Errorf("send endpoint: %w", err)
	}
	for n < len(msg) {
		m, err := sendmsgRetry(fd, msg[n:], nil)
		if err != nil {
			return fmt.Errorf("send endpoint: %w", err)
		}
		n += m
	}
	return nil
}

func sendmsgRetry(fd int, p, oob []byte) (int, error) {
	for {
		n, err := unix.SendmsgN(fd, p, oob, nil, unix.MSG_NOSIGNAL)
		if err == unix.EINTR {
			continue
		}
		return n, err
	}
}

// RecvEndpoint reads one message written by SendEndpoint from the unix
// stream socket fd. The returned files are owned by the caller. A malformed
// message (length over MaxEndpointData, more than MaxEndpointFiles files,
// early EOF) returns an error wrapping ErrInvalid and closes any files that
// arrived with it.
func RecvEndpoint(fd int) (Endpoint, error) {
	var ep Endpoint
	hdr := make([]byte, 4)
	oob := make([]byte, unix.CmsgSpace(4*MaxEndpointFiles))
	got := 0
	for got < len(hdr) {
		n, oobn, flags, _, err := unix.Recvmsg(fd, hdr[got:], oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			closeAll(ep.Files)
			return Endpoint{}, fmt.Errorf("receive endpoint: %w", err)
		}
		if oobn > 0 {
			files, perr := fdhook.Rights(oob[:oobn])
			ep.Files = append(ep.Files, files...)
			if perr != nil || flags&unix.MSG_CTRUNC != 0 {
				closeAll(ep.Files)
				return Endpoint{}, fmt.Errorf("receive endpoint: bad control message: %w", ErrInvalid)
			}
		}
		if n == 0 {
			closeAll(ep.Files)
			return Endpoint{}, fmt.Errorf("receive endpoint: EOF: %w", ErrInvalid)
		}
		got += n
	}
	size := binary.LittleEndian.Uint32(hdr)
	if size > MaxEndpointData || len(ep.Files) > MaxEndpointFiles {
		closeAll(ep.Files)
		return Endpoint{}, fmt.Errorf("receive endpoint: %d bytes, %d files: %w", size, len(ep.Files), ErrInvalid)
	}
	ep.Data = make([]byte, size)
	for got = 0; got < int(size); {
		n, err := unix.Read(fd, ep.Data[got:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			closeAll(ep.Files)
			return Endpoint{}, fmt.Errorf("receive endpoint: short data (%d of %d): %w", got, size, ErrInvalid)
		}
		got += n
	}
	return ep, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
