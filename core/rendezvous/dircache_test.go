package rendezvous

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The run directory stays open between uses while its path names it, and
// is opened and checked again once it does not: made again, its mode
// changed, or a symlink in its place.
func TestRunDirKeptOpen(t *testing.T) {
	dir := runDir(t)
	n := newNode(t, Config{RunDir: dir})
	fdOf := func() (int, error) {
		fd := -1
		err := n.withRunDir(true, func(dirfd int) error {
			fd = dirfd
			return nil
		})
		return fd, err
	}
	first, err := fdOf()
	if err != nil {
		t.Fatal(err)
	}
	if again, err := fdOf(); err != nil || again != first {
		t.Fatalf("second use: fd %d (%v), want the kept %d", again, err, first)
	}
	inode := func(fd int) uint64 {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			t.Fatalf("fstat %d: %v", fd, err)
		}
		return st.Ino
	}
	old := inode(first)
	// Made again: the next use opens the new one; the old is closed.
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	fd, err := fdOf()
	if err != nil {
		t.Fatal(err)
	}
	if inode(fd) == old {
		t.Fatal("a use after the directory was made again got the removed one")
	}
	if fd != first {
		if err := unix.Fstat(first, &unix.Stat_t{}); err != unix.EBADF {
			t.Fatalf("the replaced descriptor %d is still open (%v)", first, err)
		}
	}
	// Open to others: checked again, and refused.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := fdOf(); ReasonOf(err) != ReasonRunDir {
		t.Fatalf("a world-writable run directory: %v, want a run-directory fallback", err)
	}
	// A symlink in its place: never followed.
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	target := t.TempDir()
	if err := os.Symlink(target, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := fdOf(); err == nil {
		t.Fatal("a symlink run directory was used")
	}
}

// A run directory renamed away and replaced by another under its path is
// taken up once dirRecheck has passed since the path was last looked at;
// the one renamed away is closed.
func TestRunDirReplacedByRename(t *testing.T) {
	dir := runDir(t)
	n := newNode(t, Config{RunDir: dir})
	ino := func() uint64 {
		var st unix.Stat_t
		err := n.withRunDir(true, func(dirfd int) error { return unix.Fstat(dirfd, &st) })
		if err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	old := ino()
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	time.Sleep(dirRecheck)
	if got := ino(); got == old {
		t.Fatalf("a use %v after the run directory was replaced got the one renamed away", dirRecheck)
	}
}
