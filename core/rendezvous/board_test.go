package rendezvous

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// OpenBoard makes this user's board (mode 0600, laid out), opens it again
// with its entries kept, and refuses a symlink, a file open to others and
// a hard link; ReadBoardIn reads it from the directory.
func TestOpenBoard(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	n, err := New(Config{RunDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	fd, err := n.OpenBoard()
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteEntry(fd, 5, TenantEntry{PID: 4242, Demand: 3, Beat: 99}); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	path := filepath.Join(dir, boardName(uint32(os.Geteuid())))
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 || st.Size() != BoardSize {
		t.Fatalf("board %s: %v %v", path, st, err)
	}
	if fd, err = n.OpenBoard(); err != nil {
		t.Fatal(err)
	}
	if err := WriteStarved(fd, 4343, 77); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	b, err := ReadBoardIn(dir, os.Geteuid())
	if es := b.Entries; err != nil || len(es) != 1 || es[0] != (TenantEntry{PID: 4242, Demand: 3, Beat: 99}) {
		t.Fatalf("entries %+v, %v; want the one written", es, err)
	}
	if b.StarvedPID != 4343 || b.StarvedAt != 77 {
		t.Errorf("starved mark %d at %d, want the one written (4343 at 77)", b.StarvedPID, b.StarvedAt)
	}

	for _, bad := range []func() error{
		func() error { return os.Chmod(path, 0o644) },
		func() error { return os.Link(path, path+".other") },
		func() error {
			if err := os.Rename(path, path+".real"); err != nil {
				return err
			}
			return os.Symlink(path+".real", path)
		},
	} {
		os.Remove(path + ".other")
		if err := bad(); err != nil {
			t.Fatal(err)
		}
		if fd, err := n.OpenBoard(); err == nil {
			unix.Close(fd)
			t.Errorf("a board made unsafe was opened")
		}
		if _, err := ReadBoardIn(dir, os.Geteuid()); err == nil {
			t.Errorf("ReadBoardIn read a board made unsafe")
		}
		os.Remove(path + ".other")
		os.Remove(path)
		os.Remove(path + ".real")
		if fd, err := n.OpenBoard(); err != nil { // made afresh
			t.Fatal(err)
		} else {
			unix.Close(fd)
		}
	}
}

// FuzzDecodeBoard: any bytes decode to at most BoardEntries entries, each
// with a pid, and a starved mark, or to ErrNoBoard and nothing.
func FuzzDecodeBoard(f *testing.F) {
	head := make([]byte, BoardSize)
	binary.LittleEndian.PutUint32(head, BoardMagic)
	binary.LittleEndian.PutUint32(head[4:], BoardVersion)
	binary.LittleEndian.PutUint32(head[8:], BoardEntries)
	f.Add(head)
	f.Add(head[:BoardHeader])
	f.Add(append(head[:BoardHeader:BoardHeader], TenantEntry{PID: 7, Demand: 1}.Bytes()...))
	f.Add([]byte("not a board"))
	f.Fuzz(func(t *testing.T, b []byte) {
		bd, err := decodeBoard(b)
		es := bd.Entries
		if err != nil {
			if err != ErrNoBoard || es != nil || bd.StarvedPID != 0 {
				t.Fatalf("%+v, %v", bd, err)
			}
			return
		}
		if len(es) > BoardEntries {
			t.Fatalf("%d entries", len(es))
		}
		for _, e := range es {
			if e.PID == 0 {
				t.Fatalf("an entry without a pid: %+v", e)
			}
		}
	})
}
