package mux_test

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/mux"
	"github.com/sdpshim/sdpshim/core/shm"
	"github.com/sdpshim/sdpshim/core/statusbyte"
	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/core/wire"
)

// Cross-process channel tests re-execute the test binary as the peer: the
// environment names its role and fd 3 is its end of the setup socket. The
// peer exits when its channel ends (the test closes its side, or kills
// it).

const muxPeerEnv = "SDPSHIM_CORE_MUX_PEER"

var peerTransport = statusbyte.Config{Blocks: 16, BlockSize: 4096, Flow: "testcredit"}

// benchTransport is the benchmarks' transport: 64 blocks of 64 KiB.
var benchTransport = statusbyte.Config{Blocks: 64, BlockSize: 64 << 10, Flow: "open"}

// roleConfig returns the transport and channel configuration of a role:
// "bench-*:MODE" roles use benchTransport, openFlow and wait mode MODE.
func roleConfig(role string) (statusbyte.Config, mux.ChannelConfig) {
	if name, mode, ok := strings.Cut(role, ":"); ok && strings.HasPrefix(name, "bench-") {
		return benchTransport, mux.ChannelConfig{NewFlow: newOpenFlow, NewPolicy: policyOf(mode)}
	}
	return peerTransport, mux.ChannelConfig{NewFlow: newCreditFlow(6, true)}
}

// policyOf returns a constructor of wait policies of mode.
func policyOf(mode string) func() wait.WaitPolicy {
	return func() wait.WaitPolicy {
		p, err := wait.NewWaitPolicy(mode, wait.DefaultPollParams())
		if err != nil {
			panic(err)
		}
		return p
	}
}

func TestMain(m *testing.M) {
	if role := os.Getenv(muxPeerEnv); role != "" {
		os.Exit(runMuxPeer(role))
	}
	os.Exit(m.Run())
}

// startMuxPeer starts the peer in role and returns this side's channel
// and transport, and the peer process.
func startMuxPeer(t testing.TB, role string) (*mux.Channel, *statusbyte.Transport, *exec.Cmd) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), muxPeerEnv+"="+role)
	cmd.ExtraFiles = []*os.File{os.NewFile(uintptr(fds[1]), "setup")}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd.ExtraFiles[0].Close()
	p, err := shm.Open()
	if err != nil {
		t.Fatal(err)
	}
	tc, cfg := roleConfig(role)
	tr, err := statusbyte.Open(p, fds[0], tc, time.Now().Add(muxDeadline))
	unix.Close(fds[0])
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	cfg.Initiator = tr.Initiator()
	ch, err := mux.NewChannel(tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ch.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(muxDeadline):
			cmd.Process.Kill()
			<-done
			t.Errorf("peer %q did not exit after the channel closed", role)
		}
		p.Close()
	})
	return ch, tr, cmd
}

// runMuxPeer is the peer process's main.
func runMuxPeer(role string) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "mux peer %s: %v\n", role, err)
		return 2
	}
	p, err := shm.Open()
	if err != nil {
		return fail(err)
	}
	tc, cfg := roleConfig(role)
	tr, err := statusbyte.Open(p, 3, tc, time.Now().Add(muxDeadline))
	if err != nil {
		return fail(err)
	}
	if act, ok := rawRoles[role]; ok { // speaks to the transport directly
		act(tr)
		waitEnd(tr)
		return 0
	}
	cfg.Initiator = tr.Initiator()
	ch, err := mux.NewChannel(tr, cfg)
	if err != nil {
		return fail(err)
	}
	name, _, _ := strings.Cut(role, ":")
	switch name {
	case "bench-sink":
		return benchSink(ch)
	case "echo", "bench-echo":
		for {
			s, err := ch.Accept(time.Time{})
			if err != nil {
				return 0 // the test closed the channel
			}
			go func() {
				io.Copy(s, s)
				s.Close()
			}()
		}
	case "flood":
		s, err := ch.Open()
		if err != nil {
			return fail(err)
		}
		buf := make([]byte, 64<<10)
		for {
			if _, err := s.Write(buf); err != nil {
				return 0
			}
		}
	}
	return fail(fmt.Errorf("unknown role"))
}

// waitEnd waits until the test closes its side of the transport.
func waitEnd(tr *statusbyte.Transport) {
	w := wait.NewWaiter(wait.EventPolicy{})
	w.Wait(func() bool {
		_, _, err := tr.Receive()
		return err != nil
	}, tr.DataBell(), time.Now().Add(muxDeadline))
	tr.Close()
}

// rawRoles are hostile peers that write blocks a channel must reject.
var rawRoles = map[string]func(*statusbyte.Transport){
	// A data block twice.
	"duplicate": func(tr *statusbyte.Transport) {
		id := peerID(tr)
		tr.TrySend(wire.BlockHeader{Stream: id, Seq: 0, Flags: wire.FlagData}, []byte("a"))
		tr.TrySend(wire.BlockHeader{Stream: id, Seq: 0, Flags: wire.FlagData}, []byte("b"))
	},
	// A block for a stream of the other side's id space it never opened.
	"bogus-id": func(tr *statusbyte.Transport) {
		tr.TrySend(wire.BlockHeader{Stream: peerID(tr) + 1001, Flags: wire.FlagData}, []byte("a"))
	},
	// A sequence number far ahead.
	"far-seq": func(tr *statusbyte.Transport) {
		tr.TrySend(wire.BlockHeader{Stream: peerID(tr), Seq: 1 << 30, Flags: wire.FlagData}, []byte("a"))
	},
	// More credit than the controller ever gave.
	"credit-overflow": func(tr *statusbyte.Transport) {
		id := peerID(tr)
		tr.TrySend(wire.BlockHeader{Stream: id, Seq: 0, Flags: wire.FlagControl}, nil)
		rec := wire.AppendControl(nil, []wire.ControlRecord{{Kind: wire.ControlCredit, Value: 1000}})
		tr.TrySend(wire.BlockHeader{Stream: id, Seq: 1, Flags: wire.FlagControl}, rec)
	},
	// Data after FIN.
	"after-fin": func(tr *statusbyte.Transport) {
		id := peerID(tr)
		tr.TrySend(wire.BlockHeader{Stream: id, Seq: 0, Flags: wire.FlagFIN}, nil)
		tr.TrySend(wire.BlockHeader{Stream: id, Seq: 1, Flags: wire.FlagData}, []byte("late"))
	},
}

// peerID is the first stream id the raw peer may open.
func peerID(tr *statusbyte.Transport) uint32 {
	if tr.Initiator() {
		return 1
	}
	return 2
}
