package mux_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/core/mux"
	"github.com/sdpshim/sdpshim/core/statusbyte"
	"github.com/sdpshim/sdpshim/core/wire"
)

// waitFor polls cond (each call may pump the channel) until it holds or
// the mux deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(muxDeadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRcvBufLimitsUnreadBytes: a writer with a 1000-byte send buffer
// facing a receiver that announces a 2000-byte receive buffer and does
// not read gets one block of at most 3000 bytes into a 16-block channel; a nonblocking writer then gets EAGAIN and no
// writability; once the reader reads, the rest flows, byte-exact.
func TestRcvBufLimitsUnreadBytes(t *testing.T) {
	a, b := channelPair(t, statusbyte.Config{Blocks: 16, BlockSize: 4096, Flow: "open"},
		mux.ChannelConfig{NewFlow: newOpenFlow})
	sa, sb := openPair(t, a, b)
	sa.SetSendBuf(1000)
	sb.SetRcvBuf(2000)
	waitFor(t, "the writer to learn the receive buffer", func() bool {
		sa.WriteReady() // pumps the control block
		return sa.PeerRcvBuf() == 2000
	})
	sa.SetNonblock(true)
	msg := make([]byte, 20000)
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	sent := 0
	for sent < len(msg) {
		n, err := sa.Write(msg[sent:])
		sent += n
		if errors.Is(err, wire.ErrWouldBlock) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, fmt.Sprintf("%d bytes to arrive", sent), func() bool { sb.ReadReady(); return sb.Buffered() == sent })
	if sent == 0 || sent > 3000 {
		t.Fatalf("a writer facing 1000+2000 bytes of buffers got %d bytes out", sent)
	}
	if sa.WriteReady() {
		t.Fatal("writable while the receiver holds all its receive buffer allows")
	}
	// The reader drains; the writer finishes.
	sa.SetNonblock(false)
	done := make(chan error, 1)
	go func() {
		sa.SetWriteDeadline(time.Now().Add(muxDeadline))
		_, err := sa.Write(msg[sent:])
		if err == nil {
			err = sa.CloseWrite()
		}
		done <- err
	}()
	sb.SetReadDeadline(time.Now().Add(muxDeadline))
	var got bytes.Buffer
	max := 0
	buf := make([]byte, 512)
	for {
		if k := sb.Buffered(); k > max {
			max = k
		}
		n, err := sb.Read(buf)
		got.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), msg) {
		t.Fatalf("received %d bytes, not the %d sent", got.Len(), len(msg))
	}
	if max > 3000 {
		t.Fatalf("%d bytes unread at once under 1000+2000 bytes of buffers", max)
	}
	// Lifting the limit: blocks of the full payload again.
	sb.SetRcvBuf(0)
	waitFor(t, "the limit to lift", func() bool { sa.WriteReady(); return sa.PeerRcvBuf() == 0 })
}

// TestSendBufBoundsBufferedCopy: a buffered controller's nonblocking
// Write copies at most the stream's send buffer when nothing can go.
func TestSendBufBoundsBufferedCopy(t *testing.T) {
	a, b := channelPair(t, statusbyte.Config{Blocks: 4, BlockSize: 1024, Flow: "testcredit"},
		mux.ChannelConfig{NewFlow: newCreditFlow(1, true)})
	sa, sb := openPair(t, a, b)
	sa.SetSendBuf(5000)
	sa.SetNonblock(true)
	total := 0
	for i := 0; i < 100; i++ {
		n, err := sa.Write(make([]byte, 1000))
		total += n
		if errors.Is(err, wire.ErrWouldBlock) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// One block's payload may have gone on the single credit.
	if total > 5000+1024 {
		t.Fatalf("nonblocking writes took %d bytes with a 5000-byte send buffer", total)
	}
	if sa.WriteReady() {
		t.Fatal("writable with a full send buffer")
	}
	_ = sb
}
