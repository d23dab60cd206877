package statusbyte

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/shm"
	"github.com/sdpshim/sdpshim/core/verbs"
)

// Cross-process tests re-execute the test binary as the peer: the
// environment names its role, fd 3 is its end of the setup socket and fd 4
// a control socket (the peer reports "acted" with one byte, and exits when
// the test closes its end).

const peerEnv = "SDPSHIM_STATUSBYTE_PEER"

var peerConfig = Config{Blocks: 8, BlockSize: 256}

func TestMain(m *testing.M) {
	if role := os.Getenv(peerEnv); role != "" {
		os.Exit(runPeer(role))
	}
	os.Exit(m.Run())
}

// peerProc is a running peer process.
type peerProc struct {
	cmd *exec.Cmd
	ctl int
}

// startPeer starts the peer in role and opens this side's transport.
func startPeer(t *testing.T, role string) (*Transport, *peerProc) {
	t.Helper()
	setup, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), peerEnv+"="+role)
	cmd.ExtraFiles = []*os.File{os.NewFile(uintptr(setup[1]), "setup"), os.NewFile(uintptr(ctl[1]), "ctl")}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for _, f := range cmd.ExtraFiles {
		f.Close()
	}
	pp := &peerProc{cmd: cmd, ctl: ctl[0]}
	t.Cleanup(func() {
		unix.Close(pp.ctl)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(testDeadline):
			cmd.Process.Kill()
			<-done
		}
	})
	p, err := shm.Open()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Open(p, setup[0], peerConfig, time.Now().Add(testDeadline))
	unix.Close(setup[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close(); p.Close() })
	return tr, pp
}

// awaitActed waits for the peer's one-byte report.
func (pp *peerProc) awaitActed(t *testing.T) {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(pp.ctl), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, int(testDeadline/time.Millisecond)); n != 1 || err != nil {
		t.Fatalf("peer did not report: %v", err)
	}
	var b [1]byte
	if n, _ := unix.Read(pp.ctl, b[:]); n != 1 {
		t.Fatal("peer exited before acting")
	}
}

// runPeer is the peer process's main.
func runPeer(role string) int {
	act, ok := peerRoles[role]
	if !ok {
		fmt.Fprintf(os.Stderr, "peer: unknown role %q\n", role)
		return 2
	}
	p, err := shm.Open()
	if err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		return 2
	}
	tr, err := Open(p, 3, peerConfig, time.Now().Add(testDeadline))
	if err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		return 2
	}
	act(tr)
	unix.Write(4, []byte{1})
	fds := []unix.PollFd{{Fd: 4, Events: unix.POLLIN}}
	unix.Poll(fds, int(testDeadline/time.Millisecond)) // until the test closes its end
	tr.Close()
	return 0
}

// rawWrite writes p at offset off of the peer's receive region, bypassing
// the protocol (a hostile peer).
func rawWrite(t *Transport, off int, p []byte) error {
	st := t.local.Bytes()[t.lay.stageOff:]
	copy(st, p)
	wr := &verbs.SendRequest{Op: verbs.OpWrite,
		SGEs:       []verbs.SGE{{Key: t.local.LocalKey(), Offset: uint64(t.lay.stageOff), Length: uint32(len(p))}},
		RemoteAddr: t.peer.At(uint64(off)), RemoteKey: t.peer.Key}
	return t.link.PostData(wr, true)
}
