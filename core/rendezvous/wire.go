package rendezvous

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// Wire format. Every message travels on a unix stream socket as one frame:
//
//	0..3    body length, little endian (headerLen + data length)
//	4..     body; SCM_RIGHTS files ride with the frame's first bytes
//
// The body:
//
//	0..3    magic "SDPr"
//	4       version (WireVersion)
//	5       kind: 1 offer, 2 answer, 3 refusal, 4 pull (pull.go), 5
//	        committed offer, 6 bound (unbound.go)
//	6       reason (refusal only, else 0)
//	7       number of files sent with the frame
//	8..23   client address, 16 bytes (IPv4 as v4-mapped)
//	24..25  client port, big endian
//	26..41  server address
//	42..43  server port
//	44..47  sender pid, little endian (informational)
//	48..51  the connector's TCP socket's inode, little endian: an unbound
//	        committed offer's (unbound.go), else 0
//	52..    data: the opaque payload (offer, answer) or a short text (refusal)
//
// After a positive answer the connector writes one byte, commitByte, just
// before its TCP connect(); after the acceptor's claim or drop the listener
// writes one verdict byte (verdictAccepted, verdictDeclined) and closes.
//
// A committed offer is an offer and its commit at once: the connector
// sends it just before its TCP connect() and does not wait for an answer
// (OfferCommitted). The listener answers when its accept() claims the
// connection, and that answer is the verdict "accepted"; a refusal, or
// the connection's end without one, is "declined". A connector that gives
// the connection up before the verdict writes abortByte; its end without
// that byte (it died) does not withdraw the offer.
//
// A committed offer may leave the client port 0 (unbound.go): the
// connector then sends a bound frame, its 4-tuple and nothing else,
// right after its connect() returned.
// A reader checks magic and version before anything else; a message of
// another version is refused with ReasonProtocol.
const (
	WireVersion = 2
	wireMagic   = "SDPr"
	headerLen   = 52

	// MaxData bounds a payload's bytes, MaxFiles its files.
	MaxData  = 64 << 10
	MaxFiles = 16
	// maxText bounds a refusal's text.
	maxText = 256
)

type kind uint8

const (
	kindOffer          kind = 1
	kindAnswer         kind = 2
	kindRefusal        kind = 3
	kindPull           kind = 4
	kindOfferCommitted kind = 5
	kindBound          kind = 6
)

// Single bytes written after the answer.
const (
	commitByte      = 'C'
	abortByte       = 'X' // a committed offer withdrawn
	verdictAccepted = 'A'
	verdictDeclined = 'D'
)

// message is one decoded frame body (its files are carried separately).
type message struct {
	kind   kind
	reason Reason
	nfiles int
	tuple  Tuple
	pid    uint32
	sock   uint32 // an unbound committed offer's socket inode
	data   []byte
}

var errMessage = errors.New("malformed rendezvous message")

func (m message) encode() []byte {
	b := make([]byte, 4+headerLen+len(m.data))
	binary.LittleEndian.PutUint32(b, uint32(headerLen+len(m.data)))
	h := b[4:]
	copy(h, wireMagic)
	h[4] = WireVersion
	h[5] = byte(m.kind)
	h[6] = byte(m.reason)
	h[7] = byte(m.nfiles)
	putAddrPort(h[8:26], m.tuple.Client)
	putAddrPort(h[26:44], m.tuple.Server)
	binary.LittleEndian.PutUint32(h[44:], m.pid)
	binary.LittleEndian.PutUint32(h[48:], m.sock)
	copy(h[headerLen:], m.data)
	return b
}

func putAddrPort(b []byte, ap netip.AddrPort) {
	a := ap.Addr()
	if !a.IsValid() {
		a = netip.IPv6Unspecified()
	}
	a16 := a.As16()
	copy(b, a16[:])
	binary.BigEndian.PutUint16(b[16:], ap.Port())
}

func getAddrPort(b []byte) netip.AddrPort {
	a := netip.AddrFrom16([16]byte(b[:16])).Unmap()
	return netip.AddrPortFrom(a, binary.BigEndian.Uint16(b[16:]))
}

// checkBodyLen validates a frame's length prefix before the body is read.
func checkBodyLen(n uint32) error {
	if n < headerLen || n > headerLen+MaxData {
		return fmt.Errorf("body length %d: %w", n, errMessage)
	}
	return nil
}

// decodeMessage parses a frame body. It checks everything a reader relies
// on except the tuple's meaning, which the caller checks.
func decodeMessage(body []byte) (message, error) {
	if len(body) < headerLen || len(body) > headerLen+MaxData {
		return message{}, fmt.Errorf("body length %d: %w", len(body), errMessage)
	}
	if string(body[:4]) != wireMagic {
		return message{}, fmt.Errorf("bad magic %q: %w", body[:4], errMessage)
	}
	if body[4] != WireVersion {
		return message{}, fmt.Errorf("version %d, want %d: %w", body[4], WireVersion, errMessage)
	}
	m := message{
		kind:   kind(body[5]),
		reason: Reason(body[6]),
		nfiles: int(body[7]),
		tuple:  Tuple{Client: getAddrPort(body[8:26]), Server: getAddrPort(body[26:44])},
		pid:    binary.LittleEndian.Uint32(body[44:]),
		sock:   binary.LittleEndian.Uint32(body[48:]),
		data:   body[headerLen:],
	}
	switch {
	case m.kind < kindOffer || m.kind > kindBound:
		return message{}, fmt.Errorf("kind %d: %w", m.kind, errMessage)
	case m.nfiles > MaxFiles:
		return message{}, fmt.Errorf("%d files: %w", m.nfiles, errMessage)
	case m.kind == kindRefusal && (m.reason == ReasonNone || !m.reason.Valid() || m.nfiles != 0 || len(m.data) > maxText):
		return message{}, fmt.Errorf("refusal reason %d, %d files, %d bytes: %w", m.reason, m.nfiles, len(m.data), errMessage)
	case m.kind != kindRefusal && m.reason != ReasonNone:
		return message{}, fmt.Errorf("reason %d on kind %d: %w", m.reason, m.kind, errMessage)
	case m.sock != 0 && (m.kind != kindOfferCommitted || !m.tuple.unbound()):
		return message{}, fmt.Errorf("socket inode on kind %d for %s: %w", m.kind, m.tuple, errMessage)
	}
	return m, nil
}
