package rendezvous

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestEnsureRunDir(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "a", "sdpshim")
	if err := EnsureRunDir(dir); err != nil {
		t.Fatalf("creating: %v", err)
	}
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v (%v), want 0700", info.Mode(), err)
	}
	if err := EnsureRunDir(dir); err != nil {
		t.Errorf("existing: %v", err)
	}

	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := EnsureRunDir(open); err == nil || !strings.Contains(err.Error(), "mode") {
		t.Errorf("world-writable: %v", err)
	}

	group := filepath.Join(base, "group")
	if err := os.Mkdir(group, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(group, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := EnsureRunDir(group); err == nil || ReasonOf(err) != ReasonRunDir {
		t.Errorf("group-readable: %v, want a %s error", err, ReasonRunDir)
	}

	link := filepath.Join(base, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if err := EnsureRunDir(link); err == nil {
		t.Error("a symlink was accepted")
	}

	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := EnsureRunDir(file); err == nil {
		t.Error("a plain file was accepted")
	}

	if os.Geteuid() == 0 {
		foreign := filepath.Join(base, "foreign")
		if err := os.Mkdir(foreign, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(foreign, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if err := EnsureRunDir(foreign); err == nil || !strings.Contains(err.Error(), "owned") {
			t.Errorf("foreign owner: %v", err)
		}
	}
}

// TestMakeRecordDir: the first Defer makes the record directory with the
// run directory's access, private or (as root, what the node agent is)
// shared, and a record directory that breaks the rule (a symlink) is
// refused, with the run directory's reason.
func TestMakeRecordDir(t *testing.T) {
	for _, shared := range []bool{false, true} {
		if shared && unix.Geteuid() != 0 {
			continue // only root makes one in a shared run directory
		}
		dir := runDir(t)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if shared {
			if err := unix.Chmod(dir, sharedDirMode); err != nil {
				t.Fatal(err)
			}
		}
		n := newNode(t, Config{RunDir: dir, Handler: echoHandler})
		d, err := n.Defer(Tuple{Client: ap("127.0.0.1:5555"), Server: ap("127.0.0.1:4000")}, -1)
		if err != nil {
			t.Fatalf("shared %v: %v", shared, err)
		}
		n.Undefer(d)
		var st unix.Stat_t
		want := uint32(0o700)
		if shared {
			want = sharedDirMode
		}
		if err := unix.Lstat(n.RecordDir(), &st); err != nil || st.Mode&0o7777 != want {
			t.Errorf("shared %v: record directory mode %04o, %v; want %04o", shared, st.Mode&0o7777, err, want)
		}
	}
	dir := runDir(t)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(dir, recordDir)); err != nil {
		t.Fatal(err)
	}
	n := newNode(t, Config{RunDir: dir, Handler: echoHandler})
	_, err := n.Defer(Tuple{Client: ap("127.0.0.1:5556"), Server: ap("127.0.0.1:4000")}, -1)
	wantReason(t, err, ReasonRunDir)
}
