package setup

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wire"
)

// hello is one side's setup message, carried as the data of one
// SendEndpoint message whose files are the endpoints' files in order:
//
//	0..3   magic "SDPh"
//	4..5   SetupVersion
//	6..7   zero
//	8..15  nonce (the larger nonce's side is the Initiator)
//	16..19 blocks
//	20..23 block size
//	then   transport, flow, provider: 1-byte length + bytes each
//	then   for each endpoint: 4-byte data length, 1-byte file count, data
//	then   4-byte blob length, blob
//
// The version is checked before anything after it is parsed, so a later
// version may change the rest.
type hello struct {
	nonce                     uint64
	blocks, blockSize         uint32
	transport, flow, provider string
	eps                       [2]verbs.Endpoint
	blob                      []byte
	files                     []int // decoded: every file received, owned until handed on
}

const helloMagic = "SDPh"

func (h *hello) encode() verbs.Endpoint {
	b := make([]byte, 24, 128+len(h.blob))
	copy(b, helloMagic)
	binary.LittleEndian.PutUint16(b[4:], SetupVersion)
	binary.LittleEndian.PutUint64(b[8:], h.nonce)
	binary.LittleEndian.PutUint32(b[16:], h.blocks)
	binary.LittleEndian.PutUint32(b[20:], h.blockSize)
	for _, s := range []string{h.transport, h.flow, h.provider} {
		b = append(b, byte(len(s)))
		b = append(b, s...)
	}
	var files []int
	for _, ep := range h.eps {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(ep.Data)))
		b = append(b, byte(len(ep.Files)))
		b = append(b, ep.Data...)
		files = append(files, ep.Files...)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(h.blob)))
	b = append(b, h.blob...)
	return verbs.Endpoint{Data: b, Files: files}
}

// decodeHello parses a hello; on error the caller still owns ep.Files.
func decodeHello(ep verbs.Endpoint) (hello, error) {
	d := helloDecoder{b: ep.Data}
	if magic := d.bytes(4); string(magic) != helloMagic {
		return hello{}, fmt.Errorf("setup: peer sent no sdpshim hello (magic %q): %w", magic, wire.ErrProtocol)
	}
	if v := d.u16(); v != SetupVersion {
		return hello{}, fmt.Errorf("setup: peer speaks version %d, this side %d: %w", v, SetupVersion, ErrVersion)
	}
	d.u16()
	h := hello{nonce: d.u64(), blocks: d.u32(), blockSize: d.u32()}
	h.transport, h.flow, h.provider = d.name(), d.name(), d.name()
	files := ep.Files
	for i := range h.eps {
		n, nf := d.u32(), int(d.u8())
		h.eps[i].Data = d.bytes(int(n))
		if nf > len(files) {
			d.fail("more endpoint files than were sent")
			break
		}
		h.eps[i].Files, files = files[:nf:nf], files[nf:]
	}
	h.blob = d.bytes(int(d.u32()))
	if d.err == nil && len(files) != 0 {
		d.fail("files beyond the endpoints'")
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return hello{}, fmt.Errorf("setup: malformed hello: %s: %w", d.err, wire.ErrProtocol)
	}
	h.files = ep.Files
	return h, nil
}

// agree checks that two hellos describe the same channel.
func (h *hello) agree(o *hello) error {
	var diffs []string
	diff := func(what string, a, b any) {
		if a != b {
			diffs = append(diffs, fmt.Sprintf("%s %v here, %v at the peer", what, a, b))
		}
	}
	diff("transport", h.transport, o.transport)
	diff("flow control", h.flow, o.flow)
	diff("provider", h.provider, o.provider)
	diff("blocks", h.blocks, o.blocks)
	diff("block size", h.blockSize, o.blockSize)
	if len(diffs) > 0 {
		return fmt.Errorf("setup: %s: %w", strings.Join(diffs, "; "), ErrMismatch)
	}
	if h.nonce == o.nonce {
		return fmt.Errorf("setup: both sides drew nonce %#x (talking to itself?): %w", h.nonce, wire.ErrProtocol)
	}
	return nil
}

// helloDecoder reads fields in order; after the first short read every
// read returns zero values and err says why.
type helloDecoder struct {
	b   []byte
	err error
}

func (d *helloDecoder) fail(why string) {
	if d.err == nil {
		d.err = fmt.Errorf("%s", why)
	}
	d.b = nil
}

func (d *helloDecoder) bytes(n int) []byte {
	if d.err != nil || n > len(d.b) {
		d.fail("truncated")
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *helloDecoder) u8() byte {
	if p := d.bytes(1); p != nil {
		return p[0]
	}
	return 0
}

func (d *helloDecoder) u16() uint16 {
	if p := d.bytes(2); p != nil {
		return binary.LittleEndian.Uint16(p)
	}
	return 0
}

func (d *helloDecoder) u32() uint32 {
	if p := d.bytes(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (d *helloDecoder) u64() uint64 {
	if p := d.bytes(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (d *helloDecoder) name() string {
	n := int(d.u8())
	s := string(d.bytes(n))
	if d.err == nil && !validName(s) {
		d.fail(fmt.Sprintf("name %q", s))
	}
	return s
}
