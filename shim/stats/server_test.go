package stats

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// fetchEnv makes the test binary a stats client: it fetches the socket
// named in the variable, prints "served PID" or "error: ...", and exits.
const fetchEnv = "SDPSHIM_STATS_TEST_FETCH"

func TestMain(m *testing.M) {
	if path := os.Getenv(fetchEnv); path != "" {
		s, err := Fetch(path, 2*time.Second)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("served", s.Process.PID)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestServe(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	reg := NewRegistry(Options{})
	reg.Open(ConnInfo{FD: 3, Transport: TransportSHM}).Sent(42)
	// A stale socket of a dead process is swept; a live one is kept.
	os.MkdirAll(dir, 0o700)
	dead := deadPID(t)
	os.WriteFile(filepath.Join(dir, SockName(dead)), nil, 0o600)
	var mu sync.Mutex
	fds := map[int]int{}
	srv := &Server{RunDir: dir, Registry: reg,
		Protect:   func(fd int) { mu.Lock(); fds[fd]++; mu.Unlock() },
		Unprotect: func(fd int) { mu.Lock(); fds[fd]--; mu.Unlock() },
	}
	stop, err := srv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if _, err := os.Stat(filepath.Join(dir, SockName(dead))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale socket of dead pid %d not swept: %v", dead, err)
	}
	path := filepath.Join(dir, SockName(os.Getpid()))
	if st, err := os.Stat(path); err != nil || st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket %s: %v, mode %v; want a socket with mode 0600", path, err, st.Mode())
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("run directory mode %v, want 0700", st.Mode().Perm())
	}
	eps, err := List(dir)
	if err != nil || len(eps) != 1 || eps[0].PID != os.Getpid() || eps[0].Path != path {
		t.Fatalf("List = %+v, %v", eps, err)
	}
	for i := range 3 {
		s, err := Fetch(path, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if s.Version != Version || s.Process.PID != os.Getpid() || s.Totals.BytesSent != 42 || s.Server.Served != uint64(i) {
			t.Errorf("snapshot %d: version %d pid %d bytes %d served %d", i, s.Version, s.Process.PID, s.Totals.BytesSent, s.Server.Served)
		}
	}
	stop()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left after stop: %v", err)
	}
	if _, err := Fetch(path, time.Second); !errors.Is(err, ErrStale) {
		t.Errorf("Fetch after stop: %v, want ErrStale", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(fds) < 2 {
		t.Errorf("Protect saw %d descriptors, want the listener and clients", len(fds))
	}
	for fd, n := range fds {
		if n != 0 {
			t.Errorf("fd %d protected %d more times than unprotected", fd, n)
		}
	}
}

func TestServeUnsafeDir(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	if _, err := Serve(dir, nil, NewRegistry(Options{})); err == nil || !strings.Contains(err.Error(), "want 0700") {
		t.Errorf("Serve in a 0755 directory: %v, want a mode error", err)
	}
	if _, err := Serve("relative", nil, NewRegistry(Options{})); err == nil {
		t.Error("Serve in a relative directory succeeded")
	}
}

func TestListSkipsStale(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{SockName(deadPID(t)), "stats-x.sock", "stats-01.sock", "p1-0000.sock"} {
		os.WriteFile(filepath.Join(dir, name), nil, 0o600)
	}
	if eps, err := List(dir); err != nil || len(eps) != 0 {
		t.Errorf("List = %+v, %v; want nothing", eps, err)
	}
	if eps, err := List(filepath.Join(dir, "missing")); err != nil || eps != nil {
		t.Errorf("List of a missing directory = %+v, %v", eps, err)
	}
}

// TestPeerCred runs a client as another uid: refused with a log line,
// then served once that uid is allowed. Root only (it sets the child's
// uid).
func TestPeerCred(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as another uid")
	}
	const nobody = 65534
	base, err := os.MkdirTemp("", "statscred")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	dir := filepath.Join(base, "run")
	log, hook := test.NewNullLogger()
	reg := NewRegistry(Options{Log: log})
	srv := &Server{RunDir: dir, Registry: reg}
	// Let the other uid reach the socket, so that only SO_PEERCRED stands
	// in its way (the 0700 directory and 0600 socket are the first walls).
	path := filepath.Join(dir, SockName(os.Getpid()))
	start := func() (stop func()) {
		stop, err := srv.Start()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{base, dir} {
			os.Chmod(p, 0o711)
		}
		os.Chmod(path, 0o666)
		return stop
	}
	stop := start()
	exe := childBinary(t)

	out, err := runAs(exe, path, nobody)
	if err == nil || !strings.Contains(out, "closed without a snapshot") {
		t.Fatalf("client of uid %d: %v, %q; want refused", nobody, err, out)
	}
	// The client tries twice (FetchPID): two refusals.
	if s := reg.Snapshot(); s.Server.Refused != 2 || s.Server.Served != 0 {
		t.Errorf("server stats %+v, want 2 refused", s.Server)
	}
	e := hook.LastEntry()
	if e == nil || e.Level != logrus.WarnLevel || !strings.Contains(e.Message, "client refused") || e.Data["client_uid"] != uint32(nobody) {
		t.Errorf("no refusal line logged: %+v", e)
	}

	stop()
	srv.Allow = []uint32{nobody}
	os.Chmod(dir, 0o700)
	defer start()()
	if out, err := runAs(exe, path, nobody); err != nil || out != "served "+strconv.Itoa(os.Getpid())+"\n" {
		t.Errorf("allowed client of uid %d: %v, %q", nobody, err, out)
	}
}

// childBinary copies the test binary where another uid can run it.
func childBinary(t *testing.T) string {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "statschild")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	exe := filepath.Join(dir, "stats.test")
	out, err := os.OpenFile(exe, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return exe
}

func runAs(exe, path string, uid uint32) (string, error) {
	cmd := exec.Command(exe)
	cmd.Env = []string{fetchEnv + "=" + path}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// deadPID returns the pid of a process that has exited.
func deadPID(t *testing.T) int {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("cannot run true:", err)
	}
	return cmd.Process.Pid
}

// TestServeBounded holds the only client slot with a client that does
// not read a large snapshot: the next client is closed at once and
// counted, and service resumes once the write times out.
func TestServeBounded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	reg := NewRegistry(Options{})
	for i := range 20000 { // a snapshot far larger than the socket buffer
		reg.Open(ConnInfo{FD: i, Transport: TransportSHM, Peer: netip.MustParseAddrPort("127.0.0.1:1")})
	}
	stop, err := (&Server{RunDir: dir, Registry: reg, MaxClients: 1, Timeout: 300 * time.Millisecond}).Start()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	path := filepath.Join(dir, SockName(os.Getpid()))
	hog, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer hog.Close()
	time.Sleep(100 * time.Millisecond) // the hog's handler is writing
	start := time.Now()
	if _, err := Fetch(path, 2*time.Second); err == nil {
		t.Fatal("a second client was served while the only slot was busy")
	}
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Errorf("the refused client waited %v", d)
	}
	// Once the hog's write times out, clients are served again (the hog's
	// snapshot is encoded first: 20000 connections, which under the race
	// detector on a loaded machine takes seconds; the wait is generous).
	var s *Snapshot
	for deadline := time.Now().Add(60 * time.Second); s == nil; time.Sleep(50 * time.Millisecond) {
		if s, err = Fetch(path, 2*time.Second); err != nil && time.Now().After(deadline) {
			t.Fatalf("after the hog: %v", err)
		}
	}
	if s.Server.Overloaded < 1 || len(s.Connections) != 20000 {
		t.Errorf("overloaded %d (want 1 or more), %d connections", s.Server.Overloaded, len(s.Connections))
	}
}
