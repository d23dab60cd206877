package rdma

import (
	"bytes"
	"errors"
	"testing"

	"github.com/sdpshim/sdpshim/core/verbs"
)

func sampleEndpoint() endpointInfo {
	e := endpointInfo{QPNum: 0x1234, PSN: 0xabcdef, Port: 1, LID: 7, MTU: 5, RdAtomic: 16}
	for i := range e.GID {
		e.GID[i] = byte(i + 1)
	}
	return e
}

func TestEndpointRoundTrip(t *testing.T) {
	ib := sampleEndpoint()
	roce := sampleEndpoint()
	roce.LID, roce.Global = 0, true
	for _, e := range []endpointInfo{ib, roce} {
		b := e.encode()
		if len(b) != endpointLen {
			t.Fatalf("encoded %d bytes, want %d", len(b), endpointLen)
		}
		got, err := decodeEndpoint(b)
		if err != nil {
			t.Fatalf("decode %+v: %v", e, err)
		}
		if got != e {
			t.Errorf("round trip: got %+v, want %+v", got, e)
		}
	}
}

func TestEndpointRejects(t *testing.T) {
	good := sampleEndpoint().encode()
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for name, b := range map[string][]byte{
		"empty":              nil,
		"short":              good[:endpointLen-1],
		"long":               append(bytes.Clone(good), 0),
		"magic":              mutate(func(b []byte) []byte { b[0] = 'X'; return b }),
		"version":            mutate(func(b []byte) []byte { b[2] = 2; return b }),
		"unknown flag":       mutate(func(b []byte) []byte { b[3] = 2; return b }),
		"reserved":           mutate(func(b []byte) []byte { b[18] = 1; return b }),
		"QP 0":               mutate(func(b []byte) []byte { copy(b[4:8], []byte{0, 0, 0, 0}); return b }),
		"QP 1 (GSI)":         mutate(func(b []byte) []byte { copy(b[4:8], []byte{1, 0, 0, 0}); return b }),
		"QP over 24 bits":    mutate(func(b []byte) []byte { b[7] = 1; return b }),
		"PSN over 24 bits":   mutate(func(b []byte) []byte { b[11] = 1; return b }),
		"port 0":             mutate(func(b []byte) []byte { b[14] = 0; return b }),
		"MTU 0":              mutate(func(b []byte) []byte { b[15] = 0; return b }),
		"MTU 6":              mutate(func(b []byte) []byte { b[15] = 6; return b }),
		"no LID, not global": mutate(func(b []byte) []byte { b[12], b[13] = 0, 0; return b }),
		"global, zero GID": mutate(func(b []byte) []byte {
			b[3] = endpointGlobal
			clear(b[20:])
			return b
		}),
		"shm-like": []byte("SHM1 some other provider's endpoint"),
	} {
		if _, err := decodeEndpoint(b); !errors.Is(err, verbs.ErrInvalid) {
			t.Errorf("%s: decode returned %v, want ErrInvalid", name, err)
		}
	}
}

// FuzzDecodeEndpoint: decoding never panics, and whatever it accepts
// re-encodes to the same bytes (the format has one encoding per value).
func FuzzDecodeEndpoint(f *testing.F) {
	f.Add(sampleEndpoint().encode())
	roce := sampleEndpoint()
	roce.Global, roce.LID = true, 0
	f.Add(roce.encode())
	f.Add([]byte{})
	f.Add(make([]byte, endpointLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeEndpoint(b)
		if err != nil {
			if !errors.Is(err, verbs.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if got := e.encode(); !bytes.Equal(got, b) {
			t.Fatalf("accepted %x but re-encodes as %x", b, got)
		}
		if e.QPNum > max24 || e.PSN > max24 || e.Port == 0 || mtuBytes(e.MTU) == 0 {
			t.Fatalf("accepted out-of-range endpoint %+v", e)
		}
	})
}
