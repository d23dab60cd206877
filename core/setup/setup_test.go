package setup_test

import (
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/setup"
	"github.com/sdpshim/sdpshim/core/setup/setuptest"
	"github.com/sdpshim/sdpshim/core/shm"
	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wire"
)

// The setup tests run Establish between two shm providers in one process.

type linkSide = setuptest.Side

func testSetupConfig() setup.SetupConfig { return setuptest.Config() }

func establishPair(t *testing.T, ca, cb setup.SetupConfig) (a, b *linkSide, errA, errB error) {
	t.Helper()
	return setuptest.Pair(t, func() (verbs.Provider, error) { return shm.Open() }, ca, cb)
}

func TestEstablish(t *testing.T) {
	a, b, errA, errB := establishPair(t, testSetupConfig(), testSetupConfig())
	if errA != nil || errB != nil {
		t.Fatalf("Establish: %v / %v", errA, errB)
	}
	if a.Link.Initiator == b.Link.Initiator {
		t.Errorf("both sides have Initiator=%v", a.Link.Initiator)
	}
	if a.Peer != b.Region.Remote() || b.Peer != a.Region.Remote() {
		t.Errorf("blobs not swapped: %+v / %+v", a.Peer, b.Peer)
	}
	// A one-sided write through the link lands in the peer's region.
	copy(a.Scratch.Bytes(), "hello")
	wr := &verbs.SendRequest{Op: verbs.OpWrite, SGEs: []verbs.SGE{{Key: a.Scratch.LocalKey(), Length: 5}},
		RemoteAddr: a.Peer.At(100), RemoteKey: a.Peer.Key}
	if err := a.Link.PostData(wr, true); err != nil {
		t.Fatal(err)
	}
	if got := string(b.Region.Bytes()[100:105]); got != "hello" {
		t.Errorf("peer region holds %q", got)
	}
	if a.Link.Err() != nil || b.Link.Err() != nil {
		t.Errorf("link errors: %v / %v", a.Link.Err(), b.Link.Err())
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
