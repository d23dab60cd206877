// Package random reads random bytes from the kernel: getrandom(2), or
// /dev/urandom where a seccomp filter or an old kernel refuses it.
//
// It stands in for crypto/rand, whose packages' initialisation (the FIPS
// modules) every process pays when its core loads, a pre-fork server's
// children one each, and which adds a 32 MiB random-generator arena to the
// core's BSS: nonces and tokens need the kernel's bytes, nothing more.
package random

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Read fills b with random bytes. It fails only when neither getrandom(2)
// nor /dev/urandom gives them; b's content is then unspecified.
func Read(b []byte) error {
	for n := 0; n < len(b); {
		k, err := unix.Getrandom(b[n:], 0)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return fromFile(b[n:], err)
		}
		n += k
	}
	return nil
}

// fromFile reads the rest from /dev/urandom after getrandom failed with
// why.
func fromFile(b []byte, why error) error {
	f, err := os.Open("/dev/urandom")
	if err != nil {
		return fmt.Errorf("random: getrandom: %v; /dev/urandom: %w", why, err)
	}
	defer f.Close()
	if _, err := io.ReadFull(f, b); err != nil {
		return fmt.Errorf("random: getrandom: %v; /dev/urandom: %w", why, err)
	}
	return nil
}

// Uint64 returns a random 64-bit number, or an error as Read.
func Uint64() (uint64, error) {
	var b [8]byte
	if err := Read(b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}
