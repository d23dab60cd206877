package random

import (
	"bytes"
	"testing"
)

func TestReadFillsEveryByte(t *testing.T) {
	// Two reads of 64 KiB agreeing anywhere on a 64-byte stretch, or
	// either leaving a stretch of zeros, would mean bytes went unwritten.
	a, b := make([]byte, 1<<16), make([]byte, 1<<16)
	if err := Read(a); err != nil {
		t.Fatal(err)
	}
	if err := Read(b); err != nil {
		t.Fatal(err)
	}
	zero := make([]byte, 64)
	for i := 0; i+64 <= len(a); i += 64 {
		if bytes.Equal(a[i:i+64], b[i:i+64]) || bytes.Equal(a[i:i+64], zero) || bytes.Equal(b[i:i+64], zero) {
			t.Fatalf("stretch at %d not random", i)
		}
	}
}

func TestFromFile(t *testing.T) {
	b := make([]byte, 4096)
	if err := fromFile(b, nil); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(b, make([]byte, len(b))) {
		t.Fatal("no bytes read")
	}
}

func TestUint64Differs(t *testing.T) {
	x, err := Uint64()
	if err != nil {
		t.Fatal(err)
	}
	y, err := Uint64()
	if err != nil {
		t.Fatal(err)
	}
	if x == y {
		t.Fatalf("two draws equal: %#x", x)
	}
}
