package coretest

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/verbs"
)

func linkPair(t *testing.T) (*link, *link) {
	t.Helper()
	a, b, err := newLinkPair()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	la, lb := &link{fd: a, deadline: deadline}, &link{fd: b, deadline: deadline}
	t.Cleanup(func() { la.close(); lb.close() })
	return la, lb
}

func TestLinkCarriesEveryKind(t *testing.T) {
	a, b := linkPair(t)
	region := verbs.RemoteRegion{Key: 0xfeedbeef, Addr: 1 << 40, Len: 4096}
	pipe, err := newPipeFDs()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pipe[0])
	defer unix.Close(pipe[1])
	if err := a.sendStep("go"); err != nil {
		t.Fatal(err)
	}
	if err := a.sendWords(kindWords, 1, 2, 1<<63); err != nil {
		t.Fatal(err)
	}
	if err := a.sendEndpoint(verbs.Endpoint{Data: []byte("ep"), Files: []int{pipe[0]}}); err != nil {
		t.Fatal(err)
	}
	if err := a.sendRegion(region); err != nil {
		t.Fatal(err)
	}

	if err := b.recvStep("go"); err != nil {
		t.Fatal(err)
	}
	if v, err := b.recvWords(kindWords); err != nil || len(v) != 3 || v[2] != 1<<63 {
		t.Fatalf("words: %v %v", v, err)
	}
	ep, err := b.recvEndpoint()
	if err != nil || string(ep.Data) != "ep" || len(ep.Files) != 1 {
		t.Fatalf("endpoint: %+v %v", ep, err)
	}
	unix.Close(ep.Files[0])
	if r, err := b.recvRegion(); err != nil || r != region {
		t.Fatalf("region: %+v %v, want %+v", r, err, region)
	}
}

func TestLinkRejectsUnexpectedKind(t *testing.T) {
	a, b := linkPair(t)
	if err := a.sendWords(kindWords, 7); err != nil {
		t.Fatal(err)
	}
	if err := b.recvStep("go"); err == nil {
		t.Fatal("a words message was accepted as a step")
	}
}

func TestLinkReportsClosedPeer(t *testing.T) {
	a, b := linkPair(t)
	a.close()
	if err := b.recvStep("go"); !errors.Is(err, errLinkClosed) {
		t.Fatalf("recv after the other end closed: %v, want errLinkClosed", err)
	}
}

func TestLinkGivesUpAtDeadline(t *testing.T) {
	_, b := linkPair(t)
	b.deadline = time.Now().Add(-time.Second)
	if err := b.recvStep("go"); err == nil {
		t.Fatal("recv with nothing sent and the deadline passed succeeded")
	}
}

func newPipeFDs() ([2]int, error) {
	var p [2]int
	err := unix.Pipe2(p[:], unix.O_CLOEXEC)
	return p, err
}
