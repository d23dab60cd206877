package wire

import (
	"bytes"
	"errors"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	cases := []BlockHeader{
		{Stream: 1, Seq: 0, Len: 1, Flags: FlagData},
		{Stream: 0xffffffff, Seq: 0xffffffff, Len: 100, Flags: FlagData | FlagFIN},
		{Stream: 7, Seq: 3, Len: 0, Flags: FlagFIN},
		{Stream: 7, Seq: 3, Len: 0, Flags: FlagReset},
		{Stream: 9, Seq: 1, Len: 0, Flags: FlagControl},
		{Stream: 9, Seq: 1, Len: 16, Flags: FlagControl},
	}
	for _, h := range cases {
		var b [HeaderSize]byte
		h.Encode(b[:])
		got, err := DecodeHeader(b[:], 100)
		if err != nil || got != h {
			t.Errorf("round trip of %+v: got %+v, %v", h, got, err)
		}
	}
}

func TestHeaderRejects(t *testing.T) {
	cases := map[string]BlockHeader{
		"stream 0":          {Stream: 0, Len: 1, Flags: FlagData},
		"no flags":          {Stream: 1},
		"unknown flag":      {Stream: 1, Len: 1, Flags: FlagData | 0x40},
		"too long":          {Stream: 1, Len: 101, Flags: FlagData},
		"empty data":        {Stream: 1, Flags: FlagData},
		"reset with data":   {Stream: 1, Len: 4, Flags: FlagReset},
		"reset and data":    {Stream: 1, Len: 4, Flags: FlagReset | FlagData},
		"bare fin payload":  {Stream: 1, Len: 4, Flags: FlagFIN},
		"control and fin":   {Stream: 1, Flags: FlagControl | FlagFIN},
		"partial record":    {Stream: 1, Len: 12, Flags: FlagControl},
		"control and reset": {Stream: 1, Flags: FlagControl | FlagReset},
	}
	for name, h := range cases {
		var b [HeaderSize]byte
		h.Encode(b[:])
		if _, err := DecodeHeader(b[:], 100); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: DecodeHeader(%+v) = %v, want ErrProtocol", name, h, err)
		}
	}
}

func TestHeaderCheckCatchesCorruption(t *testing.T) {
	var b [HeaderSize]byte
	BlockHeader{Stream: 5, Seq: 77, Len: 10, Flags: FlagData}.Encode(b[:])
	for i := range b {
		for bit := 0; bit < 8; bit++ {
			c := b
			c[i] ^= 1 << bit
			if _, err := DecodeHeader(c[:], 100); err == nil {
				t.Errorf("flip of bit %d of byte %d not caught", bit, i)
			}
		}
	}
	if _, err := DecodeHeader(b[:HeaderSize-1], 100); !errors.Is(err, ErrProtocol) {
		t.Errorf("short header: %v", err)
	}
}

func TestControlRoundTrip(t *testing.T) {
	recs := []ControlRecord{{ControlCredit, 3}, {ControlWindow, 1 << 20}, {ControlCredit, 0xffffffff}}
	p := AppendControl(nil, recs)
	if len(p) != len(recs)*ControlRecordSize {
		t.Fatalf("encoded %d bytes", len(p))
	}
	got, err := DecodeControl(nil, p)
	if err != nil || len(got) != len(recs) {
		t.Fatalf("decode: %v, %v", got, err)
	}
	for i := range recs {
		if got[i] != recs[i] {
			t.Errorf("record %d: got %+v, want %+v", i, got[i], recs[i])
		}
	}
	for name, bad := range map[string][]byte{
		"kind 0":   {0, 0, 0, 0, 1, 0, 0, 0},
		"kind 99":  {99, 0, 0, 0, 1, 0, 0, 0},
		"reserved": {1, 0, 1, 0, 1, 0, 0, 0},
		"partial":  {1, 0, 0, 0, 1, 0, 0},
	} {
		if _, err := DecodeControl(nil, bad); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v, want ErrProtocol", name, err)
		}
	}
}

// FuzzHeader feeds arbitrary bytes to the decoders: they never panic, what
// decodes passes Validate and re-encodes to the same bytes.
func FuzzHeader(f *testing.F) {
	var b [HeaderSize]byte
	BlockHeader{Stream: 3, Seq: 9, Len: 40, Flags: FlagData | FlagFIN}.Encode(b[:])
	f.Add(b[:], uint16(64))
	BlockHeader{Stream: 1, Len: 8, Flags: FlagControl}.Encode(b[:])
	f.Add(append(b[:], AppendControl(nil, []ControlRecord{{ControlCredit, 2}})...), uint16(64))
	f.Add([]byte{HeaderMagic, 1, 0, 0, 1, 0, 0, 0}, uint16(0))
	f.Fuzz(func(t *testing.T, p []byte, max uint16) {
		h, err := DecodeHeader(p, int(max))
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err)
			}
		} else {
			if h.Validate(int(max)) != nil {
				t.Fatalf("decoded header %+v fails Validate", h)
			}
			var e [HeaderSize]byte
			h.Encode(e[:])
			if !bytes.Equal(e[:], p[:HeaderSize]) {
				t.Fatalf("re-encoding %+v: %x, input %x", h, e, p[:HeaderSize])
			}
		}
		if len(p) >= HeaderSize {
			recs, err := DecodeControl(nil, p[HeaderSize:])
			if err == nil && !bytes.Equal(AppendControl(nil, recs), p[HeaderSize:]) {
				t.Fatalf("control records %v do not re-encode to %x", recs, p[HeaderSize:])
			}
		}
	})
}
