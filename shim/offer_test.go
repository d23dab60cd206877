package shim

import (
	"bytes"
	"testing"
)

func TestOfferRoundTrip(t *testing.T) {
	for _, o := range []offerMsg{
		{newChannel: true, dialer: true, token: 1<<63 | 5, from: procID{pid: 4242, start: 99}},
		{token: 7, from: procID{pid: 1, start: 0}},
		{direct: true, from: procID{pid: 9, start: 3}},
		{direct: true, from: procID{pid: 9, start: 3}, bells: 1<<1 | 1<<63},
		{direct: true, from: procID{pid: 9, start: 3}, bells: 1 << 2, held: 1<<0 | 1<<48},
		{direct: true, from: procID{pid: 9, start: 3}, early: 65536},
	} {
		got, err := decodeOffer(o.encode())
		if err != nil || got != o {
			t.Errorf("decode(encode(%+v)) = %+v, %v", o, got, err)
		}
	}
	a := answerMsg{id: 77, start: 12345, bells: 1<<2 | 1<<5, held: 1<<1 | 1<<63}
	if got, err := decodeAnswer(a.encode()); err != nil || got != a {
		t.Errorf("answer round trip: %+v, %v", got, err)
	}
}

func TestOfferRejectsGarbage(t *testing.T) {
	good := offerMsg{token: 3}.encode()
	bad := [][]byte{
		nil,
		good[:offerLen-1],
		append(bytes.Clone(good), 0),
		func() []byte { b := bytes.Clone(good); b[0] = 'X'; return b }(),
		func() []byte { b := bytes.Clone(good); b[4] = offerVersion + 1; return b }(),
		func() []byte { b := bytes.Clone(good); b[5] = 8; return b }(),
	}
	for i, b := range bad {
		if _, err := decodeOffer(b); err == nil {
			t.Errorf("case %d: garbage offer accepted", i)
		}
	}
	for _, b := range [][]byte{nil, answerMsg{}.encode(), answerMsg{id: 1}.encode()[:5], []byte("SDPo\x01abcd")} {
		if _, err := decodeAnswer(b); err == nil {
			t.Errorf("garbage answer %q accepted", b)
		}
	}
}

// FuzzOfferAnswer: the offer and the answer are bytes another process
// writes. Decoding any bytes never panics, and what it accepts is exactly
// what encoding the decoded message gives back: every accepted byte is a
// field, so nothing a peer sends is silently read as something else.
func FuzzOfferAnswer(f *testing.F) {
	f.Add(offerMsg{direct: true, from: procID{pid: 9, start: 3}, bells: 1<<1 | 1<<63, held: 1, early: 65536}.encode())
	f.Add(offerMsg{newChannel: true, dialer: true, token: 1<<63 | 5, from: procID{pid: 4242, start: 99}}.encode())
	f.Add(answerMsg{id: 77, start: 12345, bells: 1<<2 | 1<<5, held: 1<<1 | 1<<63}.encode())
	f.Add([]byte("SDPo\x06\xff"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if o, err := decodeOffer(b); err == nil {
			if !bytes.Equal(o.encode(), b) {
				t.Fatalf("offer %x decoded to %+v, which encodes to %x", b, o, o.encode())
			}
		}
		if a, err := decodeAnswer(b); err == nil {
			if !bytes.Equal(a.encode(), b) || a.id == 0 {
				t.Fatalf("answer %x decoded to %+v", b, a)
			}
		}
	})
}
