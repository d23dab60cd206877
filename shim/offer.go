package shim

import (
	"encoding/binary"
	"errors"
)

// The shim's part of a rendezvous (rendezvous.Payload.Data).
//
// Offer, connector to acceptor, 46 bytes, little endian:
//
//	0..3    magic "SDPo"
//	4       version (offerVersion)
//	5       flags: 1 new channel (Files[0] is a unix socket to set it up
//	        over), 2 the sender's end is the dialer end, 4 direct (Files
//	        are the area's memfd, then the connector's bells; no channel)
//	6..13   channel token; direct: where the area is (slotToken): 0, an
//	        area of its own (Files[0] its memfd), else Files[0] is a slab's
//	        memfd (areapool.go) and this its bytes per area << 16 | the
//	        area's index
//	14..17  connector pid
//	18..25  connector start time (/proc/PID/stat field 22)
//	26..33  direct: the numbers of the connector's bells that follow the
//	        memfd, as a mask (bit n: bell n, bit 0 the switch watcher's;
//	        bells.go), else zero
//	34..41  direct: the mask of the acceptor's bells the connector holds
//	        (the acceptor gives the others in its answer), else zero
//	42..45  direct, a pulled deferred connection's offer: the bytes the
//	        connector wrote on the kernel socket before it (early.go),
//	        which the puller moves into the area before its verdict;
//	        else zero
//
// Answer, acceptor to connector, 33 bytes: magic "SDPa", version, the id
// of the stream the acceptor opened (4 bytes), the acceptor's start time
// (8 bytes), the mask of the acceptor's bells that are the answer's files
// (8 bytes), the mask of the connector's bells the acceptor holds once it
// took the offer's (8 bytes: the connector's next offer gives the others).
const (
	offerMagic   = "SDPo"
	answerMagic  = "SDPa"
	offerVersion = 7 // 7: slabs begin with their posts' page (post.go)
	offerLen     = 46
	answerLen    = 33

	offerNewChannel = 1
	offerDialer     = 2
	offerDirect     = 4
)

type offerMsg struct {
	direct     bool
	newChannel bool
	dialer     bool
	token      uint64 // direct: the area's place in a slab (slotToken), 0: an area of its own
	from       procID
	bells      uint64 // direct: the connector's bells among the files
	held       uint64 // direct: the acceptor's bells the connector holds
	early      uint32 // direct: bytes the connector wrote on the kernel socket first
}

// answerMsg is the acceptor's answer.
type answerMsg struct {
	id    uint32 // the stream (direct: 1)
	start uint64 // the acceptor's start time
	bells uint64 // its bells that are the answer's files
	held  uint64 // the connector's bells it holds
}

var errBadOffer = errors.New("malformed shim offer")

func (o offerMsg) encode() []byte {
	b := make([]byte, offerLen)
	copy(b, offerMagic)
	b[4] = offerVersion
	if o.newChannel {
		b[5] |= offerNewChannel
	}
	if o.dialer {
		b[5] |= offerDialer
	}
	if o.direct {
		b[5] |= offerDirect
	}
	binary.LittleEndian.PutUint64(b[6:], o.token)
	binary.LittleEndian.PutUint32(b[14:], uint32(o.from.pid))
	binary.LittleEndian.PutUint64(b[18:], o.from.start)
	binary.LittleEndian.PutUint64(b[26:], o.bells)
	binary.LittleEndian.PutUint64(b[34:], o.held)
	binary.LittleEndian.PutUint32(b[42:], o.early)
	return b
}

func decodeOffer(b []byte) (offerMsg, error) {
	if len(b) != offerLen || string(b[:4]) != offerMagic || b[4] != offerVersion || b[5]&^7 != 0 {
		return offerMsg{}, errBadOffer
	}
	return offerMsg{
		direct:     b[5]&offerDirect != 0,
		newChannel: b[5]&offerNewChannel != 0,
		dialer:     b[5]&offerDialer != 0,
		token:      binary.LittleEndian.Uint64(b[6:]),
		from:       procID{pid: int(binary.LittleEndian.Uint32(b[14:])), start: binary.LittleEndian.Uint64(b[18:])},
		bells:      binary.LittleEndian.Uint64(b[26:]),
		held:       binary.LittleEndian.Uint64(b[34:]),
		early:      binary.LittleEndian.Uint32(b[42:]),
	}, nil
}

func (a answerMsg) encode() []byte {
	b := make([]byte, answerLen)
	copy(b, answerMagic)
	b[4] = offerVersion
	binary.LittleEndian.PutUint32(b[5:], a.id)
	binary.LittleEndian.PutUint64(b[9:], a.start)
	binary.LittleEndian.PutUint64(b[17:], a.bells)
	binary.LittleEndian.PutUint64(b[25:], a.held)
	return b
}

func decodeAnswer(b []byte) (answerMsg, error) {
	if len(b) != answerLen || string(b[:4]) != answerMagic || b[4] != offerVersion {
		return answerMsg{}, errBadOffer
	}
	a := answerMsg{id: binary.LittleEndian.Uint32(b[5:]), start: binary.LittleEndian.Uint64(b[9:]),
		bells: binary.LittleEndian.Uint64(b[17:]), held: binary.LittleEndian.Uint64(b[25:])}
	if a.id == 0 {
		return answerMsg{}, errBadOffer
	}
	return a, nil
}
