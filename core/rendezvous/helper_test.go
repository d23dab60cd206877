package rendezvous

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Helper roles, run in a re-executed test binary. Settings come from the
// environment; results go to stdout, one line each.
const (
	roleRegisterExit = "register-exit" // register RV_ADDR, say "ready", exit without cleanup
	roleAcceptor     = "acceptor"      // a shimmed TCP server for two connections
	roleFlood        = "flood"         // RV_FLOOD connections to RV_SOCK, held; says "refused N"
)

func runHelper(role string) int {
	var err error
	switch role {
	case roleRegisterExit:
		err = helperRegisterExit()
	case roleAcceptor:
		err = helperAcceptor()
	case roleFlood:
		err = helperFlood()
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

func helperRegisterExit() error {
	n, err := New(Config{RunDir: os.Getenv("RV_DIR"), Handler: echoHandler})
	if err != nil {
		return err
	}
	if err := n.Register(netip.MustParseAddrPort(os.Getenv("RV_ADDR"))); err != nil {
		return err
	}
	fmt.Println("ready")
	os.Exit(0) // no Close: the entry is left behind, as after a crash
	return nil
}

// helperAcceptor listens on 127.0.0.1, registers, prints "port N", then
// accepts two connections. For each it calls Claim and writes one line on
// the connection: "claimed <offer data> <offer file content> <pid>" or
// "plain".
func helperAcceptor() error {
	type prep struct {
		data, fileText string
		pid            int
		answerFile     int
	}
	n, err := New(Config{
		RunDir: os.Getenv("RV_DIR"),
		Handler: func(req Request) (Payload, any, error) {
			defer closeFiles(req.Payload.Files)
			if len(req.Payload.Files) != 1 {
				return Payload{}, nil, fmt.Errorf("want 1 file, got %d", len(req.Payload.Files))
			}
			buf := make([]byte, 64)
			k, _ := unix.Pread(req.Payload.Files[0], buf, 0)
			fd, err := unix.MemfdCreate("answer", unix.MFD_CLOEXEC)
			if err != nil {
				return Payload{}, nil, err
			}
			unix.Pwrite(fd, []byte("answer-file"), 0)
			p := &prep{data: string(req.Payload.Data), fileText: string(buf[:k]), pid: req.PID, answerFile: fd}
			return Payload{Data: []byte("answer-data"), Files: []int{fd}}, p, nil
		},
		OnDrop: func(m Match, _ DropCause) { unix.Close(m.Prepared.(*prep).answerFile) },
	})
	if err != nil {
		return err
	}
	defer n.Close()
	lfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	if err := unix.Bind(lfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return err
	}
	if err := unix.Listen(lfd, 8); err != nil {
		return err
	}
	sa, _ := unix.Getsockname(lfd)
	addr := sockaddrAP(sa)
	if err := n.Register(addr); err != nil {
		return err
	}
	fmt.Printf("port %d\n", addr.Port())
	for range 2 {
		cfd, rsa, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
		if err != nil {
			return err
		}
		lsa, _ := unix.Getsockname(cfd)
		line := "plain\n"
		if m, why := n.Claim(sockaddrAP(lsa), sockaddrAP(rsa)); why == ReasonNone {
			p := m.Prepared.(*prep)
			unix.Close(p.answerFile)
			if m.Request.Tuple.Client != sockaddrAP(rsa) || p.pid != m.Request.PID {
				line = "bad match\n"
			} else {
				line = fmt.Sprintf("claimed %s %s %d\n", p.data, p.fileText, p.pid)
			}
		}
		unix.Write(cfd, []byte(line))
		unix.Close(cfd)
	}
	return n.Unregister(addr)
}

// helperFlood opens RV_FLOOD connections to the rendezvous socket RV_SOCK
// one after another and sends nothing on them, as a process flooding a
// listener's rendezvous would. It prints "refused N", N the connections
// refused at once (a refusal or a close instead of the wait for a
// request), and holds the rest until it is killed.
func helperFlood() error {
	n, err := strconv.Atoi(os.Getenv("RV_FLOOD"))
	if err != nil {
		return err
	}
	var held []int // kept open until the process dies
	refused := 0
	for i := 0; i < n; i++ {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		if err := unix.Connect(fd, &unix.SockaddrUnix{Name: os.Getenv("RV_SOCK")}); err != nil {
			return err
		}
		// A refusal comes at once; a served connection says nothing
		// until its ReadTimeout.
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if k, _ := unix.Poll(pfd, 500); k > 0 {
			refused++
			unix.Close(fd)
			continue
		}
		held = append(held, fd)
	}
	fmt.Printf("refused %d\n", refused)
	time.Sleep(time.Hour)
	return nil
}

// helperProc is a running helper process.
type helperProc struct {
	cmd   *exec.Cmd
	lines chan string
}

func startHelper(t *testing.T, role string, env ...string) *helperProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, helperEnv+"="+role)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helperProc{cmd: cmd, lines: make(chan string, 16)}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			h.lines <- s.Text()
		}
		close(h.lines)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return h
}

// line returns the helper's next stdout line.
func (h *helperProc) line(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-h.lines:
		if !ok {
			t.Fatal("helper exited early")
		}
		return strings.TrimSpace(l)
	case <-time.After(guard):
		t.Fatal("helper said nothing")
		return ""
	}
}

// wait waits for the helper to exit and fails t unless it succeeded.
func (h *helperProc) wait(t *testing.T) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- h.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("helper: %v", err)
		}
	case <-time.After(guard):
		t.Fatal("helper did not exit")
	}
}
