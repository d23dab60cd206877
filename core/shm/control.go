package shm

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/sdpshim/sdpshim/core/sharedmem"
)

// Control area layout. A queue pair creates one control area and both it
// (the owner) and its peer map it. It holds the owner's inbound ring: the
// records the peer sends to the owner. Each word has one writer:
//
//	owner line    state, epoch, cons, nack, nack status: written by the
//	              owner, read by the peer
//	sleep line    sleeping: the owner stores 1 before it sleeps, the peer
//	              swaps 1 for 0 and then rings the owner's eventfd
//	producer line prod: written by the peer, read by the owner
//	ring          records written by the peer, read by the owner
//
// Neither side trusts a word the other side writes: the owner keeps its own
// consumer position privately and only publishes it, and every value read
// is checked before it is used.
const (
	ctlMagic   = 0x53504453 // "SDPS"
	ctlVersion = 2

	offMagic    = 0
	offVersion  = 4
	offState    = 64  // uint32: owner's wire state (wireInit...)
	offEpoch    = 68  // uint32: bumped after every region announcement
	offCons     = 72  // uint64: inbound ring bytes consumed
	offNack     = 80  // uint64: 1 + ring position of a record the owner rejected
	offNackSt   = 88  // uint32: verbs.Status of that rejection, stored before nack
	offSleeping = 128 // uint32: owner asleep, ring me
	offProd     = 192 // uint64: inbound ring bytes produced

	ringOff  = 4096
	ringSize = 256 << 10
	ctlSize  = ringOff + ringSize
)

// Wire states published in the control area.
const (
	wireInit   = 0
	wireReady  = 1
	wireError  = 2
	wireClosed = 3
)

// MaxMessageSize is the largest SEND payload the provider carries.
const MaxMessageSize = 64 << 10

// Ring records. A record starts at a multiple of recAlign, never wraps, and
// begins with a 16-byte header: payload length, kind, immediate, reserved.
// A pad record fills the rest of the ring so the next record starts at 0.
const (
	recAlign  = 64
	recHeader = 16

	recSend      = 1 // SEND, payload follows
	recSendImm   = 2 // SEND with immediate, payload follows
	recWriteImm  = 3 // receive side of WRITE_WITH_IMM; length is the write's length
	recPad       = 4 // skip to the start of the ring
	recWrite     = 5 // WRITE carried by the ring: write header, then length bytes
	recWriteData = 6 // WRITE_WITH_IMM carried by the ring: as recWrite, then a RECV
	recKindLimit = 7
)

// A WRITE or WRITE_WITH_IMM posted behind records the peer has not
// consumed yet travels in the ring itself, so that the peer executes it
// after them (RC ordering) without the sender waiting for a round trip.
// Its payload starts with a write header: remote address (uint64), remote
// key (uint32), reserved (uint32); the record's length field counts the
// data after it, at most MaxMessageSize.
const writeHeader = 16

// recordSize returns the ring bytes a record with payload bytes occupies.
func recordSize(payload uint64) uint64 {
	return (recHeader + payload + recAlign - 1) &^ (recAlign - 1)
}

// area is a mapped control area with its shared words resolved once.
type area struct {
	mem      []byte
	ring     []byte
	state    *atomic.Uint32
	epoch    *atomic.Uint32
	sleeping *atomic.Uint32
	cons     *atomic.Uint64
	nack     *atomic.Uint64
	nackSt   *atomic.Uint32
	prod     *atomic.Uint64
}

// newArea resolves the shared words of a mapping of ctlSize bytes.
func newArea(mem []byte) area {
	return area{
		mem:      mem,
		ring:     mem[ringOff : ringOff+ringSize],
		state:    sharedmem.Uint32At(mem, offState),
		epoch:    sharedmem.Uint32At(mem, offEpoch),
		sleeping: sharedmem.Uint32At(mem, offSleeping),
		cons:     sharedmem.Uint64At(mem, offCons),
		nack:     sharedmem.Uint64At(mem, offNack),
		nackSt:   sharedmem.Uint32At(mem, offNackSt),
		prod:     sharedmem.Uint64At(mem, offProd),
	}
}

// mapped reports whether the area is mapped.
func (a *area) mapped() bool { return a.mem != nil }

// initHeader writes the header of a fresh area owned by the caller.
func (a *area) initHeader() {
	binary.LittleEndian.PutUint32(a.mem[offMagic:], ctlMagic)
	binary.LittleEndian.PutUint32(a.mem[offVersion:], ctlVersion)
	a.state.Store(wireInit)
}

// headerValid reports whether a peer's area carries this version's header.
func (a *area) headerValid() bool {
	return sharedmem.Uint32At(a.mem, offMagic).Load() == ctlMagic &&
		sharedmem.Uint32At(a.mem, offVersion).Load() == ctlVersion
}

// putRecordHeader writes a record header at ring offset off.
func putRecordHeader(ring []byte, off uint64, length, kind, imm uint32) {
	h := ring[off : off+recHeader]
	binary.LittleEndian.PutUint32(h[0:], length)
	binary.LittleEndian.PutUint32(h[4:], kind)
	binary.LittleEndian.PutUint32(h[8:], imm)
	binary.LittleEndian.PutUint32(h[12:], 0)
}

// loadRecordHeader reads a record header at ring offset off once; the
// caller validates the values, never the memory again.
func loadRecordHeader(ring []byte, off uint64) (length, kind, imm uint32) {
	o := int(off)
	return sharedmem.Uint32At(ring, o).Load(), sharedmem.Uint32At(ring, o+4).Load(), sharedmem.Uint32At(ring, o+8).Load()
}
