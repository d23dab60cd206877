package tests

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A process that connects to itself: the connection is accelerated (the
// kernel's TCP carries none of its bytes) and every socket semantic the
// program checks holds, as it does on kernel TCP.
func TestSelfConnect(t *testing.T) {
	a := build(t)
	for _, args := range [][]string{nil, {"-n"}} {
		t.Run("args"+strings.Join(args, ""), func(t *testing.T) {
			rd := runDir(t)
			for _, shim := range []bool{false, true} {
				s := side{shim: shim, log: filepath.Join(t.TempDir(), "self.log")}
				p := start(t, a.environ(t, s, rd), 60*time.Second, a.selfpair, args...)
				if err := p.wait(); err != nil {
					t.Fatalf("shim=%v: %v\n%s", shim, err, p.errb.String())
				}
				var res struct {
					OK          bool   `json:"ok"`
					KernelBytes uint64 `json:"kernel_bytes"`
				}
				if err := json.Unmarshal([]byte(strings.TrimSpace(p.out.String())), &res); err != nil || !res.OK {
					t.Fatalf("shim=%v: result %q: %v", shim, p.out.String(), err)
				}
				switch {
				case shim && res.KernelBytes > 1024:
					t.Errorf("shimmed: the kernel's TCP carried %d bytes: not accelerated\n%s", res.KernelBytes, readLog(t, s.log))
				case !shim && res.KernelBytes < 1<<20:
					t.Errorf("plain: the kernel's TCP carried only %d bytes (the check is blind)", res.KernelBytes)
				}
			}
		})
	}
}

// A bad SDPSHIM_* value: the program runs on kernel TCP, and says why in
// one clear line on stderr.
func TestBadSettingFallsBack(t *testing.T) {
	a := build(t)
	rd := runDir(t)
	bad := side{shim: true, env: []string{"SDPSHIM_BLOCKS=3x"}}
	srv := start(t, a.environ(t, bad, rd), 30*time.Second, a.pingpong, "server", "-a", "127.0.0.1", "-p", "0")
	port := srv.listening(t)
	cli := start(t, a.environ(t, bad, rd), 30*time.Second, a.pingpong, "client", "-a", "127.0.0.1",
		"-p", fmt.Sprint(port), "-n", "200", "-s", "64")
	if err := cli.wait(); err != nil {
		t.Fatalf("client: %v\n%s", err, cli.errb.String())
	}
	if err := srv.wait(); err != nil {
		t.Fatalf("server: %v\n%s", err, srv.errb.String())
	}
	result(t, srv.out.String(), "server")
	for who, p := range map[string]*proc{"server": srv, "client": cli} {
		lines := strings.Split(strings.TrimSpace(p.errb.String()), "\n")
		if len(lines) != 1 || !strings.Contains(lines[0], `SDPSHIM_BLOCKS="3x"`) || !strings.Contains(lines[0], "plain TCP") {
			t.Errorf("%s stderr: want one line about SDPSHIM_BLOCKS, got %q", who, p.errb.String())
		}
	}
}

// A peer killed in the middle of a stream: the other side ends promptly,
// never hangs, and ends as it does on kernel TCP in the same case: a
// killed writer leaves its reader an EOF after every byte it sent (a
// clean end), a killed reader leaves its writer an error (EPIPE or
// ECONNRESET). On kernel TCP a writer killed inside a write that had
// copied part of its message (a full send buffer) leaves that part too:
// the reader reports the cut message after its EOF, which is the same
// end (it failed a clean-clone CI run: 487,633,759 bytes, not a whole
// number of 4096-byte messages).
func TestPeerKilledMidStream(t *testing.T) {
	a := build(t)
	for _, killServer := range []bool{true, false} {
		name := map[bool]string{true: "server-killed", false: "client-killed"}[killServer]
		t.Run(name, func(t *testing.T) {
			var clean [2]bool
			for i, shim := range []bool{false, true} {
				rd := runDir(t)
				logs := t.TempDir()
				srvSide := side{shim: shim, log: filepath.Join(logs, "server.log")}
				cliSide := side{shim: shim, log: filepath.Join(logs, "client.log")}
				srv := start(t, a.environ(t, srvSide, rd), 30*time.Second, a.stream, "server", "-a", "127.0.0.1", "-p", "0")
				port := srv.listening(t)
				cli := start(t, a.environ(t, cliSide, rd), 30*time.Second, a.stream,
					"client", "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-s", "4096", "-t", "20")
				victim, survivor := srv, cli
				if !killServer {
					victim, survivor = cli, srv
				}
				time.Sleep(500 * time.Millisecond)
				victim.cmd.Process.Signal(syscall.SIGKILL)
				began := time.Now()
				err := survivor.wait()
				clean[i] = err == nil || strings.Contains(survivor.errb.String(), "-byte messages") // EOF, a message cut
				if time.Since(began) > 10*time.Second {
					t.Fatalf("shim %v: the survivor took %v to notice", shim, time.Since(began))
				}
				if err != nil {
					t.Logf("shim %v: survivor's error: %s", shim, survivor.errb.String())
				}
				if l := readLog(t, cliSide.log); shim && !strings.Contains(l, "connected accelerated") {
					t.Errorf("the connection was not accelerated:\n%s", l)
				}
			}
			if clean[0] != clean[1] {
				t.Errorf("the survivor ended at EOF: %v on kernel TCP, %v under the shim", clean[0], clean[1])
			}
		})
	}
}

func writeRandomFile(t *testing.T, path string, size int) [32]byte {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), rand.Reader, int64(size)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

func fileHash(t *testing.T, path string) [32]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

// freePort returns a TCP port free on 127.0.0.1 now.
//
// The port is below the kernel's ephemeral range (so no outgoing
// connection takes it between this check and the program's bind) and is
// checked without SO_REUSEADDR (so no TIME_WAIT connection of an earlier
// test holds it: a program that binds without the option would fail).
func freePort(t *testing.T) int {
	t.Helper()
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		fmt.Sscan(string(b), &lo)
	}
	if lo > 11000 {
		for range 200 {
			var n [2]byte
			rand.Read(n[:])
			port := 10000 + (int(n[0])<<8|int(n[1]))%(lo-10000)
			if bindable(port) {
				return port
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// bindable reports whether a listener without SO_REUSEADDR can bind
// 127.0.0.1:port now.
func bindable(port int) bool {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	return unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}) == nil &&
		unix.Listen(fd, 1) == nil
}

// waitPort waits until something listens on port (or p ends).
func waitPort(t *testing.T, p *proc, port int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
			c.Close()
			return
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("server ended: %v\n%s", err, p.errb.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("nothing listens on %d after 15 s\n%s", port, p.errb.String())
}
