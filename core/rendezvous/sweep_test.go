package rendezvous

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPrepareRunDir: the agent's directory is shared by group (3770, its
// owner the caller) or private (0700), and the one rule accepts it; a
// symlink in its place is refused.
func TestPrepareRunDir(t *testing.T) {
	base := t.TempDir()
	shared := filepath.Join(base, "node", "rd")
	if err := PrepareRunDir(shared, unix.Getegid()); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(shared, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o7777 != 0o3770 || int(st.Uid) != unix.Geteuid() || int(st.Gid) != unix.Getegid() {
		t.Errorf("shared: mode %04o uid %d gid %d", st.Mode&0o7777, st.Uid, st.Gid)
	}
	if err := EnsureRunDir(shared); err != nil {
		t.Errorf("shared directory refused by the rule: %v", err)
	}
	if err := unix.Stat(filepath.Join(shared, recordDir), &st); err != nil || st.Mode&0o7777 != 0o3770 || int(st.Uid) != unix.Geteuid() {
		t.Errorf("shared record directory: mode %04o uid %d, %v", st.Mode&0o7777, st.Uid, err)
	}
	// An existing directory is brought to the rule.
	if err := PrepareRunDir(shared, -1); err != nil {
		t.Fatal(err)
	}
	if unix.Stat(shared, &st); st.Mode&0o7777 != 0o700 {
		t.Errorf("private: mode %04o", st.Mode&0o7777)
	}
	if unix.Stat(filepath.Join(shared, recordDir), &st); st.Mode&0o7777 != 0o700 {
		t.Errorf("private record directory: mode %04o", st.Mode&0o7777)
	}
	link := filepath.Join(base, "link")
	os.Symlink(shared, link)
	if err := PrepareRunDir(link, -1); ReasonOf(err) != ReasonRunDir {
		t.Errorf("symlink: %v", err)
	}
}

// TestSweepEveryUID: a process that registered and died leaves its entry
// and socket; Sweep removes them and counts them, leaving a live
// process's alone. As root the dead process runs as another uid in a
// shared directory, whose files a Node of root would not remove.
func TestSweepEveryUID(t *testing.T) {
	dir := runDir(t)
	bin := os.Args[0]
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		const gid = 4242
		if err := PrepareRunDir(dir, gid); err != nil {
			t.Fatal(err)
		}
		// The test binary, where uid 65534 may run it (the test's
		// temporary directory and its parent are the test's own).
		base := filepath.Dir(dir)
		os.Chmod(base, 0o755)
		os.Chmod(filepath.Dir(base), 0o755)
		bin = filepath.Join(base, "helper")
		copyFile(t, os.Args[0], bin)
		cred = &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{gid}}
	}
	// The live process first: its server's start sweeps too.
	live := newNode(t, Config{RunDir: dir, Handler: echoHandler})
	if err := live.Register(ap("127.0.0.1:4201")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+roleRegisterExit, "RV_DIR="+dir, "RV_ADDR=127.0.0.1:4200")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helper: %v: %s", err, out)
	}
	dead, _ := filepath.Glob(filepath.Join(dir, "l4200-*"))
	deadSocks := sockets(t, dir)
	if len(dead) != 1 || len(deadSocks) != 2 {
		t.Fatalf("before the sweep: dead entries %v, sockets %v", dead, deadSocks)
	}
	removed, err := Sweep(dir)
	if err != nil {
		t.Fatal(err)
	}
	if removed != 2 {
		t.Errorf("Sweep removed %d files, want 2 (the dead entry and socket)", removed)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "l4200-*")); len(left) != 0 {
		t.Errorf("dead entry left: %v", left)
	}
	if live, _ := filepath.Glob(filepath.Join(dir, "l4201-*")); len(live) != 1 || len(sockets(t, dir)) != 1 {
		t.Errorf("the live process's files: entries %v, sockets %v", live, sockets(t, dir))
	}
	if removed, err := Sweep(filepath.Join(dir, "missing")); removed != 0 || err != nil {
		t.Errorf("missing directory: %d, %v", removed, err)
	}
}

func sockets(t *testing.T, dir string) []string {
	t.Helper()
	s, _ := filepath.Glob(filepath.Join(dir, "p*.sock"))
	return s
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSweepSparesBoundSocket: a live process's rendezvous socket between
// its bind and its listen refuses a probe as a dead one's does; a sweep
// then (another process starting at the same moment: a server's two fork
// workers) must leave it, else that process's listen fails with ENOENT.
// A dead process's refused socket goes.
func TestSweepSparesBoundSocket(t *testing.T) {
	dir := runDir(t)
	if err := EnsureRunDir(dir); err != nil {
		t.Fatal(err)
	}
	bind := func(pid int) string {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		path := filepath.Join(dir, sockName(pid, random32()))
		if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
			t.Fatal(err)
		}
		return path
	}
	mine := bind(os.Getpid()) // alive, not listening yet
	// A pid no process has: the kernel's maximum.
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	var max int
	if _, err := fmt.Sscan(string(b), &max); err != nil {
		t.Fatal(err)
	}
	if unix.Kill(max, 0) != unix.ESRCH {
		t.Skipf("pid %d exists", max)
	}
	dead := bind(max)
	if _, err := Sweep(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(mine); err != nil {
		t.Errorf("the live process's bound socket was swept: %v", err)
	}
	if _, err := os.Lstat(dead); err == nil {
		t.Errorf("a dead process's refused socket was left")
	}
}

// TestSweepMakesRecordDir: the node agent's sweep makes a record
// directory that is missing (a run directory an earlier build prepared);
// a Node's own sweep does not.
func TestSweepMakesRecordDir(t *testing.T) {
	dir := runDir(t)
	if err := EnsureRunDir(dir); err != nil {
		t.Fatal(err)
	}
	n := newNode(t, Config{RunDir: dir, Handler: echoHandler})
	if _, err := n.Serve(); err != nil { // its server's start sweeps
		t.Fatal(err)
	}
	if _, err := os.Lstat(n.RecordDir()); !os.IsNotExist(err) {
		t.Fatalf("a Node's sweep made the record directory: %v", err)
	}
	if _, err := Sweep(dir); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(n.RecordDir(), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&0o7777 != 0o700 {
		t.Fatalf("after Sweep: mode %o, %v", st.Mode, err)
	}
}
