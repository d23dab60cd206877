package rendezvous

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReachesOtherNamespace: a listener of another network namespace is
// reached at its own addresses only (never through loopback), a wildcard
// of the right family; one of this namespace as listenMatches says.
func TestReachesOtherNamespace(t *testing.T) {
	n := &Node{netns: "net:[1]"}
	pod := entryFile{owner: owner{netns: "net:[2]"}, addrs: []netip.Addr{netip.MustParseAddr("10.0.0.3")}}
	cases := []struct {
		l, dst string
		want   bool
	}{
		{"0.0.0.0:80", "10.0.0.3:80", true},
		{"[::]:80", "10.0.0.3:80", true},
		{"0.0.0.0:80", "10.0.0.4:80", false}, // another pod's address
		{"0.0.0.0:80", "10.0.0.3:81", false},
		{"0.0.0.0:80", "127.0.0.1:80", false}, // its loopback is not ours
		{"10.0.0.3:80", "10.0.0.3:80", true},
		{"10.0.0.9:80", "10.0.0.3:80", false},
	}
	for _, c := range cases {
		l, dst := netip.MustParseAddrPort(c.l), netip.MustParseAddrPort(c.dst)
		if got := n.reaches(&pod, l, dst, func() bool { return true }); got != c.want {
			t.Errorf("listen %s, dial %s: reaches %v, want %v", l, dst, got, c.want)
		}
	}
	same := entryFile{owner: owner{netns: "net:[1]"}}
	if !n.reaches(&same, netip.MustParseAddrPort("0.0.0.0:80"), netip.MustParseAddrPort("127.0.0.1:80"), func() bool { return true }) {
		t.Error("a listener of this namespace is not reached through loopback")
	}
}

// TestNATRecordNames: a NAT record is named by a specific client alone
// and parses back; a wildcard or port-less client is not a NAT record.
func TestNATRecordNames(t *testing.T) {
	c := netip.MustParseAddrPort("10.0.0.2:40000")
	got, ok := parseRecordName(natRecordName(c))
	if !ok || got.Client != c {
		t.Fatalf("%s: parses to %v %v", natRecordName(c), got, ok)
	}
	for _, bad := range []string{"n0.0.0.0:1", "n10.0.0.2:0", "n10.0.0.2", "n[::ffff:10.0.0.2]:5"} {
		if _, ok := parseRecordName(bad); ok {
			t.Errorf("%q parsed as a NAT record", bad)
		}
	}
}

// TestSharedRunDir: a directory shared with a group is accepted only
// with the sticky bit, without access for others, and when the group is
// the process's; the files and sockets made there are the group's.
func TestSharedRunDir(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, mode os.FileMode, gid int) string {
		d := filepath.Join(base, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chown(d, -1, gid)
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		return d
	}
	gid := unix.Getegid()
	if err := EnsureRunDir(mk("shared", 0o770|os.ModeSticky|os.ModeSetgid, gid)); err != nil {
		t.Errorf("shared, sticky: %v", err)
	}
	if err := EnsureRunDir(mk("nosticky", 0o770, gid)); ReasonOf(err) != ReasonRunDir {
		t.Errorf("shared without the sticky bit: %v", err)
	}
	if err := EnsureRunDir(mk("others", 0o775|os.ModeSticky, gid)); ReasonOf(err) != ReasonRunDir {
		t.Errorf("open to others: %v", err)
	}
	if os.Geteuid() != 0 {
		if err := EnsureRunDir(mk("foreign", 0o770|os.ModeSticky, 65534)); ReasonOf(err) != ReasonRunDir {
			t.Errorf("another group's: %v", err)
		}
	}
	dir := filepath.Join(base, "shared")
	n := newNode(t, Config{RunDir: dir, Handler: echoHandler})
	if err := n.Register(ap("127.0.0.1:4100")); err != nil {
		t.Fatal(err)
	}
	entries, _ := filepath.Glob(filepath.Join(dir, "l4100-*"))
	socks, _ := filepath.Glob(filepath.Join(dir, "p*.sock"))
	if len(entries) != 1 || len(socks) != 1 {
		t.Fatalf("entries %v, sockets %v", entries, socks)
	}
	if fi, err := os.Lstat(entries[0]); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("entry mode %v (%v), want 0640", fi.Mode(), err)
	}
	if fi, err := os.Lstat(socks[0]); err != nil || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode %v (%v), want 0660", fi.Mode(), err)
	}
}
