package doorbell_test

import (
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/setup"
	"github.com/sdpshim/sdpshim/core/shm"
	"github.com/sdpshim/sdpshim/core/verbs"
)

// The doorbell tests run over a real Link; these helpers are the setup
// tests' own (core/setup/setup_test.go), repeated here because test files
// cannot be shared across packages.

// linkSide is one side of an in-process Establish: its provider, link,
// a board region the peer may write and the peer's board.
type linkSide struct {
	p       *shm.Provider
	link    *setup.Link
	region  verbs.Region
	scratch verbs.Region
	peer    verbs.RemoteRegion
}

func (s *linkSide) close() {
	if s.link != nil {
		s.link.Close()
	}
	for _, r := range []verbs.Region{s.region, s.scratch} {
		if r != nil {
			r.Close()
		}
	}
	s.p.Close()
}

func testSetupConfig() setup.SetupConfig {
	return setup.SetupConfig{Transport: "test", Flow: "none", Blocks: 4, BlockSize: 128}
}

// establishPair runs Establish on both ends of a socketpair, each with
// its own provider and config, and returns both sides and errors.
func establishPair(t *testing.T, ca, cb setup.SetupConfig) (a, b *linkSide, errA, errB error) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	sides := [2]*linkSide{}
	errs := [2]error{}
	var wg sync.WaitGroup
	for i, cfg := range []setup.SetupConfig{ca, cb} {
		p, err := shm.Open()
		if err != nil {
			t.Fatal(err)
		}
		s := &linkSide{p: p}
		sides[i] = s
		if s.region, err = p.RegisterRegion(4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead); err != nil {
			t.Fatal(err)
		}
		if s.scratch, err = p.RegisterRegion(4096, verbs.AccessLocalWrite); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rr := s.region.Remote()
			blob := binary.LittleEndian.AppendUint32(nil, rr.Key)
			blob = binary.LittleEndian.AppendUint64(blob, rr.Addr)
			blob = binary.LittleEndian.AppendUint64(blob, rr.Len)
			var peer []byte
			s.link, peer, errs[i] = setup.Establish(fds[i], p, cfg, blob, time.Now().Add(10*time.Second))
			if errs[i] == nil {
				s.peer = verbs.RemoteRegion{
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
