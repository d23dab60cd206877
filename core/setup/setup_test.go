package setup_test

import (
	"encoding/binary"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/setup"
	"github.com/sdpshim/sdpshim/core/shm"
	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wire"
)

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

func TestEstablish(t *testing.T) {
	a, b, errA, errB := establishPair(t, testSetupConfig(), testSetupConfig())
	if errA != nil || errB != nil {
		t.Fatalf("Establish: %v / %v", errA, errB)
	}
	if a.link.Initiator == b.link.Initiator {
		t.Errorf("both sides have Initiator=%v", a.link.Initiator)
	}
	if a.peer != b.region.Remote() || b.peer != a.region.Remote() {
		t.Errorf("blobs not swapped: %+v / %+v", a.peer, b.peer)
	}
	// A one-sided write through the link lands in the peer's region.
	copy(a.scratch.Bytes(), "hello")
	wr := &verbs.SendRequest{Op: verbs.OpWrite, SGEs: []verbs.SGE{{Key: a.scratch.LocalKey(), Length: 5}},
		RemoteAddr: a.peer.At(100), RemoteKey: a.peer.Key}
	if err := a.link.PostData(wr, true); err != nil {
		t.Fatal(err)
	}
	if got := string(b.region.Bytes()[100:105]); got != "hello" {
		t.Errorf("peer region holds %q", got)
	}
	if a.link.Err() != nil || b.link.Err() != nil {
		t.Errorf("link errors: %v / %v", a.link.Err(), b.link.Err())
	}
}

func TestEstablishMismatch(t *testing.T) {
	cb := testSetupConfig()
	cb.Blocks, cb.Flow = 8, "credit"
	_, _, errA, errB := establishPair(t, testSetupConfig(), cb)
	for _, err := range []error{errA, errB} {
		if !errors.Is(err, setup.ErrMismatch) {
			t.Errorf("got %v, want ErrMismatch", err)
		}
	}
	t.Logf("mismatch error: %v", errA)
}

func TestEstablishDeadline(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	p, _ := shm.Open()
	defer p.Close()
	_, _, err = setup.Establish(fds[0], p, testSetupConfig(), nil, time.Now().Add(50*time.Millisecond))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("got %v, want deadline exceeded", err)
	}
}

func TestEstablishPeerNotShim(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	p, _ := shm.Open()
	defer p.Close()
	go verbs.SendEndpoint(fds[1], verbs.Endpoint{Data: []byte("SDPh\x02\x00 from the future")})
	_, _, err = setup.Establish(fds[0], p, testSetupConfig(), nil, time.Now().Add(5*time.Second))
	if !errors.Is(err, setup.ErrVersion) {
		t.Fatalf("got %v, want ErrVersion", err)
	}
	go verbs.SendEndpoint(fds[1], verbs.Endpoint{Data: []byte("GET / HTTP/1.1")})
	_, _, err = setup.Establish(fds[0], p, testSetupConfig(), nil, time.Now().Add(5*time.Second))
	if !errors.Is(err, wire.ErrProtocol) {
		t.Fatalf("got %v, want ErrProtocol", err)
	}
}
