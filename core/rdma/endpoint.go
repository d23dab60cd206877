package rdma

import (
	"encoding/binary"
	"fmt"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// endpointInfo is what ibv_modify_qp to RTR needs about the peer's queue
// pair. It travels as verbs.Endpoint.Data, with no files.
type endpointInfo struct {
	QPNum    uint32   // 24 bits, >= 2 (0 and 1 are the special SMI/GSI queue pairs)
	PSN      uint32   // 24 bits: the first packet sequence number it sends
	Port     uint8    // its port number, from 1
	LID      uint16   // its port's LID; 0 on RoCE
	GID      [16]byte // its source GID (valid when Global)
	MTU      uint8    // its port's active MTU (enum ibv_mtu)
	RdAtomic uint8    // READs it can serve at once (its max_dest_rd_atomic)
	Global   bool     // the link needs a global route header (RoCE, or IB routed)
}

// Wire format, version 1, little-endian, endpointLen bytes:
//
//	0  2  magic "RD"
//	2  1  version (1)
//	3  1  flags (bit 0: Global; other bits zero)
//	4  4  QP number
//	8  4  PSN
//	12 2  LID
//	14 1  port
//	15 1  MTU (enum ibv_mtu)
//	16 1  RdAtomic
//	17 3  reserved, zero
//	20 16 GID
const (
	endpointVersion = 1
	endpointLen     = 36
	endpointGlobal  = 1 << 0
	max24           = 1<<24 - 1
)

var endpointMagic = [2]byte{'R', 'D'}

// encode returns the wire form of e.
func (e endpointInfo) encode() []byte {
	b := make([]byte, endpointLen)
	copy(b, endpointMagic[:])
	b[2] = endpointVersion
	if e.Global {
		b[3] = endpointGlobal
	}
	binary.LittleEndian.PutUint32(b[4:], e.QPNum)
	binary.LittleEndian.PutUint32(b[8:], e.PSN)
	binary.LittleEndian.PutUint16(b[12:], e.LID)
	b[14] = e.Port
	b[15] = e.MTU
	b[16] = e.RdAtomic
	copy(b[20:], e.GID[:])
	return b
}

// decodeEndpoint parses and validates a peer's description. Everything in
// it comes from the peer; anything out of range is ErrInvalid.
func decodeEndpoint(b []byte) (endpointInfo, error) {
	var e endpointInfo
	bad := func(what string, args ...any) (endpointInfo, error) {
		return endpointInfo{}, fmt.Errorf("rdma: endpoint: %s: %w", fmt.Sprintf(what, args...), verbs.ErrInvalid)
	}
	if len(b) != endpointLen {
		return bad("%d bytes, want %d (not an rdma endpoint?)", len(b), endpointLen)
	}
	if b[0] != endpointMagic[0] || b[1] != endpointMagic[1] {
		return bad("magic %q, want %q (not an rdma endpoint?)", b[:2], endpointMagic[:])
	}
	if b[2] != endpointVersion {
		return bad("version %d, want %d", b[2], endpointVersion)
	}
	if b[3]&^endpointGlobal != 0 {
		return bad("unknown flags %#x", b[3])
	}
	if b[17] != 0 || b[18] != 0 || b[19] != 0 {
		return bad("reserved bytes not zero")
	}
	e.Global = b[3]&endpointGlobal != 0
	e.QPNum = binary.LittleEndian.Uint32(b[4:])
	e.PSN = binary.LittleEndian.Uint32(b[8:])
	e.LID = binary.LittleEndian.Uint16(b[12:])
	e.Port = b[14]
	e.MTU = b[15]
	e.RdAtomic = b[16]
	copy(e.GID[:], b[20:])
	switch {
	case e.QPNum < 2 || e.QPNum > max24:
		return bad("QP number %#x", e.QPNum)
	case e.PSN > max24:
		return bad("PSN %#x over 24 bits", e.PSN)
	case e.Port == 0:
		return bad("port 0")
	case mtuBytes(e.MTU) == 0:
		return bad("MTU code %d", e.MTU)
	case !e.Global && e.LID == 0:
		return bad("no LID and no global route")
	case e.Global && e.GID == [16]byte{}:
		return bad("global route with a zero GID")
	}
	return e, nil
}
