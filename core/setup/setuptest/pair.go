// Package setuptest runs setup.Establish on both ends of a socketpair in
// one process, for the tests of setup and of the packages built on a Link.
package setuptest

import (
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/setup"
	"github.com/sdpshim/sdpshim/core/verbs"
)

// Side is one side of an in-process Establish: its provider, its link, a
// board region the peer may write, a local scratch region, and the peer's
// board (from the exchanged blob).
type Side struct {
	Provider verbs.Provider
	Link     *setup.Link
	Region   verbs.Region
	Scratch  verbs.Region
	Peer     verbs.RemoteRegion
}

func (s *Side) close() {
	if s.Link != nil {
		s.Link.Close()
	}
	for _, r := range []verbs.Region{s.Region, s.Scratch} {
		if r != nil {
			r.Close()
		}
	}
	s.Provider.Close()
}

// Config is a small valid configuration (4 blocks of 128 bytes).
func Config() setup.SetupConfig {
	return setup.SetupConfig{Transport: "test", Flow: "none", Blocks: 4, BlockSize: 128}
}

// Pair runs Establish on both ends of a socketpair, each side with a
// provider of its own from open and its config, and returns both sides
// and both errors. The sides are closed when the test ends.
func Pair(t *testing.T, open func() (verbs.Provider, error), ca, cb setup.SetupConfig) (a, b *Side, errA, errB error) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	sides := [2]*Side{}
	errs := [2]error{}
	var wg sync.WaitGroup
	for i, cfg := range []setup.SetupConfig{ca, cb} {
		p, err := open()
		if err != nil {
			t.Fatal(err)
		}
		s := &Side{Provider: p}
		sides[i] = s
		if s.Region, err = p.RegisterRegion(4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead); err != nil {
			t.Fatal(err)
		}
		if s.Scratch, err = p.RegisterRegion(4096, verbs.AccessLocalWrite); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rr := s.Region.Remote()
			blob := binary.LittleEndian.AppendUint32(nil, rr.Key)
			blob = binary.LittleEndian.AppendUint64(blob, rr.Addr)
			blob = binary.LittleEndian.AppendUint64(blob, rr.Len)
			var peer []byte
			s.Link, peer, errs[i] = setup.Establish(fds[i], p, cfg, blob, time.Now().Add(10*time.Second))
			if errs[i] == nil {
				s.Peer = verbs.RemoteRegion{
					Key:  binary.LittleEndian.Uint32(peer),
					Addr: binary.LittleEndian.Uint64(peer[4:]),
					Len:  binary.LittleEndian.Uint64(peer[12:]),
				}
			}
		}()
	}
	wg.Wait()
	t.Cleanup(func() { sides[0].close(); sides[1].close() })
	return sides[0], sides[1], errs[0], errs[1]
}
