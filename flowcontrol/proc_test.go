package flowcontrol_test

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/mux"
	"github.com/sdpshim/sdpshim/core/setup"
	"github.com/sdpshim/sdpshim/core/shm"
	"github.com/sdpshim/sdpshim/core/statusbyte"
	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/flowcontrol"
)

// Cross-process tests: the test binary re-executes itself as the peer,
// with its configuration in procPeerEnv and its end of the setup socket as
// fd 3. The peer echoes every stream it accepts (after writing the
// number of bytes the stream's first 4 bytes ask for) and exits when the
// channel ends.

const procPeerEnv = "SDPSHIM_FLOWCONTROL_PEER"

// procDeadline bounds every wait of the cross-process tests.
const procDeadline = 20 * time.Second

// procConfig is one channel's configuration, the same on both ends.
type procConfig struct {
	Flow              string
	Blocks, BlockSize int
	Credits, Window   int
	// EchoDelay: the peer waits this long after accepting a stream before
	// it starts reading (unread writes pile up meanwhile).
	EchoDelay time.Duration
}

// firstBytes returns the n bytes a peer writes first.
func firstBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*13 + 5)
	}
	return b
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(procPeerEnv); spec != "" {
		os.Exit(runProcPeer(spec))
	}
	os.Exit(m.Run())
}

// openProcChannel sets up this end of a channel over fd as the shim does:
// status-byte transport, the controller's signature compared at setup,
// Params from the transport's payload.
func openProcChannel(p verbs.Provider, fd int, pc procConfig) (*mux.Channel, error) {
	sig := flowcontrol.Signature(pc.Flow, flowcontrol.Params{Credits: pc.Credits, VirtualWindow: pc.Window})
	tr, err := statusbyte.Open(p, fd, statusbyte.Config{Blocks: pc.Blocks, BlockSize: pc.BlockSize, Flow: sig}, time.Now().Add(procDeadline))
	if err != nil {
		return nil, err
	}
	capacity := pc.Blocks * tr.MaxPayload()
	mk, err := flowcontrol.New(pc.Flow, flowcontrol.Params{
		Credits: pc.Credits, VirtualWindow: min(pc.Window, capacity),
		ReceiveCapacity: capacity, BlockPayload: tr.MaxPayload(),
	})
	if err != nil {
		tr.Close()
		return nil, err
	}
	return mux.NewChannel(tr, mux.ChannelConfig{Initiator: tr.Initiator(), NewFlow: mk})
}

// runProcPeer is the peer process's main: echo every accepted stream.
func runProcPeer(spec string) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "flowcontrol peer: %v\n", err)
		return 2
	}
	var pc procConfig
	if err := json.Unmarshal([]byte(spec), &pc); err != nil {
		return fail(err)
	}
	p, err := shm.Open()
	if err != nil {
		return fail(err)
	}
	defer p.Close()
	ch, err := openProcChannel(p, 3, pc)
	if err != nil {
		return fail(err)
	}
	for {
		s, err := ch.Accept(time.Time{})
		if err != nil {
			return 0 // the test closed the channel
		}
		go func() {
			time.Sleep(pc.EchoDelay)
			var first [4]byte
			if _, err := io.ReadFull(s, first[:]); err != nil {
				s.Close()
				return
			}
			if _, err := s.Write(firstBytes(int(binary.LittleEndian.Uint32(first[:])))); err != nil {
				s.Close()
				return
			}
			io.Copy(s, s)
			s.CloseWrite()
			s.Close()
		}()
	}
}

// startProcPeer starts the peer for pc and returns this side's channel.
func startProcPeer(t *testing.T, pc procConfig) *mux.Channel {
	t.Helper()
	spec, err := json.Marshal(pc)
	if err != nil {
		t.Fatal(err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), procPeerEnv+"="+string(spec))
	cmd.ExtraFiles = []*os.File{os.NewFile(uintptr(fds[1]), "setup")}
	cmd.Stderr = os.Stderr
	err = cmd.Start()
	cmd.ExtraFiles[0].Close()
	if err != nil {
		unix.Close(fds[0])
		t.Fatal(err)
	}
	p, err := shm.Open()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := openProcChannel(p, fds[0], pc)
	unix.Close(fds[0])
	t.Cleanup(func() {
		if ch != nil {
			ch.Close()
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(procDeadline):
			cmd.Process.Kill()
			<-done
			t.Errorf("peer did not exit after the channel closed")
		}
		p.Close()
	})
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	return ch
}

// echoThrough asks the peer to write first bytes first, then writes
// count writes of size bytes on a new stream of ch while reading what
// the peer sends, and checks that every byte comes back.
func echoThrough(t *testing.T, ch *mux.Channel, count, size, first int) {
	t.Helper()
	s, err := ch.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetDeadline(time.Now().Add(procDeadline))
	var ask [4]byte
	binary.LittleEndian.PutUint32(ask[:], uint32(first))
	if _, err := s.Write(ask[:]); err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, size)
	for i := range msg {
		msg[i] = byte(i*7 + 1)
	}
	want := crc32.NewIEEE()
	want.Write(firstBytes(first))
	for range count {
		want.Write(msg)
	}
	werr := make(chan error, 1)
	go func() {
		for i := range count {
			if _, err := s.Write(msg); err != nil {
				werr <- fmt.Errorf("write %d of %d: %w", i+1, count, err)
				return
			}
		}
		werr <- s.CloseWrite()
	}()
	got := crc32.NewIEEE()
	n, err := io.Copy(got, s)
	if err != nil {
		t.Fatalf("read the echo: %v after %d of %d bytes (writer: %v)", err, n, first+count*size, <-werr)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if total := int64(first + count*size); n != total || got.Sum32() != want.Sum32() {
		t.Fatalf("echo: %d bytes, crc %#x; want %d, %#x", n, got.Sum32(), total, want.Sum32())
	}
}

// TestProcControlGetsThrough: control records must never be stuck behind
// data the application has not read. The peer writes 384 KiB before it
// reads anything, while this side has written first and then reads: on
// the smallest channel (2 blocks per direction) this side's data took
// both blocks towards the peer, so the window posts for the peer's data
// could not go and both ends waited forever (nicassist; a stream now
// leaves a block free: ChannelConfig.MaxHeld). Then both ways at once.
func TestProcControlGetsThrough(t *testing.T) {
	for _, name := range flowcontrol.Names() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ch := startProcPeer(t, procConfig{Flow: name, Blocks: 2, BlockSize: 16384, Credits: 1, Window: 16384})
			size := 32 << 10 // held in the send buffer: Write returns
			if name == flowcontrol.NameCredit {
				size = 100 // credit's Write waits for blocks: fit the credits
			}
			echoThrough(t, ch, 1, size, 384<<10)
			echoThrough(t, ch, 60, 10000, 0)
		})
	}
}

// TestProcCreditUnreadWrites: with credit, more than K writes the reader
// has not read make the writer wait, and it goes on once the reader reads
// (the credits go back as it consumes).
func TestProcCreditUnreadWrites(t *testing.T) {
	const k = 4
	ch := startProcPeer(t, procConfig{Flow: flowcontrol.NameCredit, Blocks: 16, BlockSize: 4096, Credits: k, EchoDelay: 50 * time.Millisecond})
	echoThrough(t, ch, 4*k+1, 100, 0)
	echoThrough(t, ch, 4*k+1, 5000, 0) // two blocks a write
}

// TestProcParamMismatch: ends configured with different credits fail at
// setup, before any block.
func TestProcParamMismatch(t *testing.T) {
	pc := procConfig{Flow: flowcontrol.NameCredit, Blocks: 16, BlockSize: 4096, Credits: 4}
	spec, _ := json.Marshal(procConfig{Flow: pc.Flow, Blocks: pc.Blocks, BlockSize: pc.BlockSize, Credits: 8})
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), procPeerEnv+"="+string(spec))
	cmd.ExtraFiles = []*os.File{os.NewFile(uintptr(fds[1]), "setup")}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd.ExtraFiles[0].Close()
	defer cmd.Wait()
	p, err := shm.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ch, err := openProcChannel(p, fds[0], pc)
	unix.Close(fds[0])
	if err == nil {
		ch.Close()
		t.Fatal("channel set up between ends with 4 and 8 credits")
	}
	if !errors.Is(err, setup.ErrMismatch) {
		t.Fatalf("setup: %v, want ErrMismatch", err)
	}
}
