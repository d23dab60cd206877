package mux_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/core/mux"
	"github.com/sdpshim/sdpshim/core/statusbyte"
	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wire"
)

var smallTransport = statusbyte.Config{Blocks: 8, BlockSize: 512}

func flows() map[string]func() wire.FlowController {
	return map[string]func() wire.FlowController{
		"open":   newOpenFlow,
		"credit": newCreditFlow(4, false),
		"packed": newCreditFlow(4, true),
	}
}

func TestStreamRoundTrip(t *testing.T) {
	for name, fl := range flows() {
		t.Run(name, func(t *testing.T) {
			a, b := channelPair(t, smallTransport, mux.ChannelConfig{NewFlow: fl})
			sa, sb := openPair(t, a, b)
			var wg sync.WaitGroup
			for dir, p := range [][2]*mux.Stream{{sa, sb}, {sb, sa}} {
				sums := make(chan uint32, 1)
				wg.Add(2)
				go func() {
					defer wg.Done()
					want, err := sendRandom(p[0], uint64(dir), 200<<10, 3000)
					if err == nil {
						err = p[0].CloseWrite()
					}
					if err != nil {
						t.Errorf("dir %d send: %v", dir, err)
					}
					sums <- want
				}()
				go func() {
					defer wg.Done()
					n, got, err := recvAll(p[1], uint64(dir), 2000)
					if want := <-sums; err != nil || n != 200<<10 || got != want {
						t.Errorf("dir %d: received %d bytes, sum %#x (want %#x): %v", dir, n, got, want, err)
					}
				}()
			}
			wg.Wait()
		})
	}
}

func TestStreamsInParallel(t *testing.T) {
	a, b := channelPair(t, smallTransport, mux.ChannelConfig{NewFlow: newCreditFlow(3, true)})
	const streams = 12
	var wg sync.WaitGroup
	for i := 0; i < streams; i++ {
		sa, sb := openPair(t, a, b)
		size := 20<<10 + i*7000
		wg.Add(2)
		go func() {
			defer wg.Done()
			want, err := sendRandom(sa, uint64(i), size, 1+i*300)
			if err == nil {
				err = sa.Close()
			}
			if err != nil {
				t.Errorf("stream %d send: %v", i, err)
			}
			_ = want
		}()
		go func() {
			defer wg.Done()
			n, _, err := recvAll(sb, uint64(i), 700)
			if err != nil || n != size {
				t.Errorf("stream %d: %d of %d bytes: %v", i, n, size, err)
			}
			sb.Close()
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(muxDeadline)
	for a.Streams()+b.Streams() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := a.Streams() + b.Streams(); n != 0 {
		t.Errorf("%d streams left after every stream closed", n)
	}
}

func TestStreamHalfClose(t *testing.T) {
	a, b := channelPair(t, smallTransport, mux.ChannelConfig{NewFlow: newOpenFlow})
	sa, sb := openPair(t, a, b)
	if _, err := sa.Write([]byte("request")); err != nil {
		t.Fatal(err)
	}
	if err := sa.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := sa.Write([]byte("more")); !errors.Is(err, mux.ErrWriteShutdown) {
		t.Fatalf("write after CloseWrite: %v", err)
	}
	got, err := io.ReadAll(sb)
	if err != nil || string(got) != "request" {
		t.Fatalf("server read %q, %v", got, err)
	}
	if _, err := sb.Write([]byte("response")); err != nil {
		t.Fatal(err)
	}
	sb.Close()
	got, err = io.ReadAll(sa)
	if err != nil || string(got) != "response" {
		t.Fatalf("client read %q, %v", got, err)
	}
	if n, err := sa.Read(make([]byte, 4)); n != 0 || err != io.EOF {
		t.Fatalf("read after EOF: %d, %v", n, err)
	}
}

func TestStreamPeekBuffered(t *testing.T) {
	a, b := channelPair(t, smallTransport, mux.ChannelConfig{NewFlow: newOpenFlow})
	sa, sb := openPair(t, a, b)
	msg := bytes.Repeat([]byte("0123456789"), 100) // spans blocks of 496 bytes
	if _, err := sa.Write(msg); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(muxDeadline)
	for sb.Buffered() < len(msg) && time.Now().Before(deadline) {
		sb.ReadReady()
	}
	if sb.Buffered() != len(msg) {
		t.Fatalf("Buffered %d, want %d", sb.Buffered(), len(msg))
	}
	p := make([]byte, 600)
	if n, err := sb.Peek(p); n != 600 || err != nil || !bytes.Equal(p, msg[:600]) {
		t.Fatalf("Peek: %d %v", n, err)
	}
	if n, err := sb.Read(p[:550]); n != 550 || err != nil || !bytes.Equal(p[:550], msg[:550]) {
		t.Fatalf("Read: %d %v", n, err)
	}
	if sb.Buffered() != len(msg)-550 {
		t.Fatalf("Buffered %d after reading 550", sb.Buffered())
	}
	if n, _ := sb.Peek(p); n != len(msg)-550 || !bytes.Equal(p[:n], msg[550:]) {
		t.Fatalf("Peek after a partial read: %d", n)
	}
}

func TestStreamDeadlinesAndNonblock(t *testing.T) {
	a, b := channelPair(t, smallTransport, mux.ChannelConfig{NewFlow: newCreditFlow(2, false)})
	sa, sb := openPair(t, a, b)
	sb.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := sb.Read(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: %v", err)
	}
	// A deadline set while a Read waits applies to it.
	sb.SetReadDeadline(time.Time{})
	done := make(chan error, 1)
	go func() { _, err := sb.Read(make([]byte, 10)); done <- err }()
	time.Sleep(5 * time.Millisecond)
	sb.SetReadDeadline(time.Now())
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read after its deadline moved: %v", err)
		}
	case <-time.After(muxDeadline):
		t.Fatal("a Read ignored a new deadline")
	}
	sb.SetReadDeadline(time.Time{})
	sb.SetNonblock(true)
	if _, err := sb.Read(make([]byte, 10)); !errors.Is(err, wire.ErrWouldBlock) {
		t.Fatalf("nonblocking read: %v", err)
	}
	// The reader does not read: with 2 credits of 496 bytes a write of
	// 10000 bytes sends 992 and then times out or would block.
	sa.SetWriteDeadline(time.Now().Add(30 * time.Millisecond))
	n, err := sa.Write(make([]byte, 10000))
	if !errors.Is(err, os.ErrDeadlineExceeded) || n != 2*(512-wire.HeaderSize) {
		t.Fatalf("write past its deadline: %d, %v", n, err)
	}
	sa.SetNonblock(true)
	if n, err := sa.Write(make([]byte, 10)); n != 0 || !errors.Is(err, wire.ErrWouldBlock) {
		t.Fatalf("nonblocking write without credit: %d, %v", n, err)
	}
	sb.SetNonblock(false)
	sb.SetReadDeadline(time.Now().Add(muxDeadline))
	buf := make([]byte, 4096)
	total := 0
	for total < n {
		k, err := sb.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		total += k
	}
	deadline := time.Now().Add(muxDeadline)
	for !sa.WriteReady() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n, err := sa.Write(make([]byte, 10)); n != 10 || err != nil {
		t.Fatalf("nonblocking write after credit returned: %d, %v", n, err)
	}
}

func TestStreamCloseWithUnreadResetsPeer(t *testing.T) {
	a, b := channelPair(t, smallTransport, mux.ChannelConfig{NewFlow: newOpenFlow})
	sa, sb := openPair(t, a, b)
	if _, err := sa.Write([]byte("never read")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(muxDeadline)
	for sb.Buffered() == 0 && time.Now().Before(deadline) {
		sb.ReadReady()
	}
	sb.Close()
	if _, err := sb.Read(make([]byte, 1)); !errors.Is(err, mux.ErrStreamClosed) {
		t.Fatalf("read after Close: %v", err)
	}
	sa.SetReadDeadline(time.Now().Add(muxDeadline))
	if _, err := sa.Read(make([]byte, 1)); !errors.Is(err, mux.ErrReset) {
		t.Fatalf("peer read after a reset: %v", err)
	}
	if _, err := sa.Write([]byte("x")); !errors.Is(err, mux.ErrReset) {
		t.Fatalf("peer write after a reset: %v", err)
	}
	sa.Close()
	for a.Streams()+b.Streams() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if a.Streams()+b.Streams() != 0 {
		t.Errorf("streams left after reset and close: %d %d", a.Streams(), b.Streams())
	}
}

func TestStreamCloseWakesBlockedCalls(t *testing.T) {
	a, b := channelPair(t, smallTransport, mux.ChannelConfig{NewFlow: newOpenFlow})
	sa, _ := openPair(t, a, b)
	done := make(chan error, 1)
	go func() { _, err := sa.Read(make([]byte, 1)); done <- err }()
	time.Sleep(5 * time.Millisecond)
	sa.Close()
	select {
	case err := <-done:
		if !errors.Is(err, mux.ErrStreamClosed) {
			t.Fatalf("blocked read after Close: %v", err)
		}
	case <-time.After(muxDeadline):
		t.Fatal("Close did not wake a blocked Read")
	}
}

func TestChannelCloseEndsStreams(t *testing.T) {
	a, b := channelPair(t, smallTransport, mux.ChannelConfig{NewFlow: newOpenFlow})
	sa, sb := openPair(t, a, b)
	done := make(chan error, 1)
	go func() { _, err := sb.Read(make([]byte, 1)); done <- err }()
	a.Close()
	if _, err := sa.Write([]byte("x")); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("write on a closed channel: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, wire.ErrPeerGone) {
			t.Fatalf("peer's read: %v, want ErrPeerGone", err)
		}
	case <-time.After(muxDeadline):
		t.Fatal("peer's blocked read not ended")
	}
	if _, err := b.Open(); !errors.Is(err, wire.ErrPeerGone) {
		t.Fatalf("Open on the peer's ended channel: %v", err)
	}
}

func TestChannelPerStream(t *testing.T) {
	a, b := channelPair(t, smallTransport, mux.ChannelConfig{NewFlow: newOpenFlow, MaxStreams: 1})
	sa, sb := openPair(t, a, b)
	if _, err := a.Open(); !errors.Is(err, verbs.ErrBusy) {
		t.Fatalf("second stream on a per-connection channel: %v", err)
	}
	sa.Write([]byte("bye"))
	sa.Close()
	if got, err := io.ReadAll(sb); string(got) != "bye" || err != nil {
		t.Fatalf("read %q, %v", got, err)
	}
	sb.Close()
	deadline := time.Now().Add(muxDeadline)
	for (a.Err() == nil || b.Err() == nil) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if a.Err() == nil || b.Err() == nil { // each closes itself, or sees the other close first
		t.Fatalf("channels after their stream: %v / %v", a.Err(), b.Err())
	}
}
