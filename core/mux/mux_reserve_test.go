package mux_test

import (
	"io"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/core/mux"
	"github.com/sdpshim/sdpshim/core/statusbyte"
)

// TestControlBlockReserved: two streams whose reader does not read take
// what their credits allow of a 4-block direction, yet a credit return
// for a third stream flowing the other way still finds a block: data
// never takes the last free one.
func TestControlBlockReserved(t *testing.T) {
	a, b := channelPair(t, statusbyte.Config{Blocks: 4, BlockSize: 1024, Flow: "testcredit"},
		mux.ChannelConfig{NewFlow: newCreditFlow(2, false)})
	var unread [2]*mux.Stream
	for i := range unread {
		sa, sb := openPair(t, a, b)
		unread[i] = sb
		go func() { // two blocks of credit, then it waits: nobody reads
			sa.SetWriteDeadline(time.Now().Add(muxDeadline))
			sa.Write(make([]byte, 8<<10))
		}()
	}
	// Wait until both writers stopped: their data arrived and sits unread.
	deadline := time.Now().Add(muxDeadline)
	for unread[0].Buffered()+unread[1].Buffered() < 3*1008 && time.Now().Before(deadline) {
		unread[0].ReadReady() // pumps
	}
	time.Sleep(20 * time.Millisecond)
	unread[0].ReadReady()
	// The other way: each block b sends needs a credit that a returns.
	sb, err := b.Open()
	if err != nil {
		t.Fatal(err)
	}
	sa, err := a.Accept(time.Now().Add(muxDeadline))
	if err != nil {
		t.Fatal(err)
	}
	const total = 32 << 10
	go func() {
		sb.SetWriteDeadline(time.Now().Add(muxDeadline))
		sb.Write(make([]byte, total))
		sb.CloseWrite()
	}()
	sa.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, sa)
	if err != nil || n != total {
		t.Fatalf("read %d of %d bytes beside %d+%d unread: %v", n, total, unread[0].Buffered(), unread[1].Buffered(), err)
	}
}
