package rendezvous

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunDirCreatedPrivate(t *testing.T) {
	dir := runDir(t)
	n := newNode(t, Config{RunDir: dir, Handler: echoHandler})
	if err := n.Register(ap("127.0.0.1:4000")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("run directory: %v %v", fi.Mode(), err)
	}
	socks, _ := filepath.Glob(filepath.Join(dir, "p*.sock"))
	if len(socks) != 1 {
		t.Fatalf("sockets %v", socks)
	}
	if fi, err := os.Lstat(socks[0]); err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket %s: %v %v", socks[0], fi.Mode(), err)
	}
	entries, _ := filepath.Glob(filepath.Join(dir, "l4000-*"))
	if len(entries) != 1 {
		t.Fatalf("entries %v", entries)
	}
	if fi, err := os.Lstat(entries[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("entry %s: %v %v", entries[0], fi.Mode(), err)
	}
}

func TestRunDirRefusedWhenUnsafe(t *testing.T) {
	loose := runDir(t)
	if err := os.Mkdir(loose, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(loose, 0o755) // whatever the umask
	n := newNode(t, Config{RunDir: loose, Handler: echoHandler})
	wantReason(t, n.Register(ap("127.0.0.1:4000")), ReasonRunDir)
	_, err := n.Lookup(ap("127.0.0.1:4000"))
	wantReason(t, err, ReasonRunDir)

	target := runDir(t)
	os.Mkdir(target, 0o700)
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(target, link)
	n2 := newNode(t, Config{RunDir: link, Handler: echoHandler})
	wantReason(t, n2.Register(ap("127.0.0.1:4000")), ReasonRunDir)

	if _, err := New(Config{RunDir: "relative/dir"}); err == nil {
		t.Fatal("relative run directory accepted")
	}
}

func TestRegisterLookupUnregister(t *testing.T) {
	dir := runDir(t)
	n := newNode(t, Config{RunDir: dir, Handler: echoHandler})
	// Nothing registered yet (the directory does not even exist).
	_, err := n.Lookup(ap("127.0.0.1:4001"))
	wantReason(t, err, ReasonNotShimmed)

	for _, a := range []string{"127.0.0.1:4001", "0.0.0.0:4002", "[::]:4003", "[::1]:4004"} {
		if err := n.Register(ap(a)); err != nil {
			t.Fatal(err)
		}
	}
	found := []struct {
		dst, listen string
	}{
		{"127.0.0.1:4001", "127.0.0.1:4001"},
		{"[::ffff:127.0.0.1]:4001", "127.0.0.1:4001"}, // v4-mapped
		{"127.0.0.1:4002", "0.0.0.0:4002"},
		{"127.9.9.9:4002", "0.0.0.0:4002"}, // any loopback address
		{"127.0.0.1:4003", "[::]:4003"},    // dual-stack wildcard
		{"[::1]:4003", "[::]:4003"},
		{"[::1]:4004", "[::1]:4004"},
	}
	for _, c := range found {
		e := lookupOne(t, n, ap(c.dst))
		if e.Listen != ap(c.listen) || e.PID != os.Getpid() || e.UID != uint32(os.Geteuid()) || e.Socket != n.srv.path {
			t.Errorf("lookup %s: %+v", c.dst, e)
		}
	}
	for _, dst := range []string{
		"127.0.0.2:4001", // another address than the one bound
		"127.0.0.1:4005", // nobody on that port
		"[::1]:4002",     // v4 wildcard does not take v6
		"127.0.0.1:4004", // v6 loopback listener does not take v4
		"192.0.2.1:4002", // TEST-NET: not a local address
		"[2001:db8::1]:4003",
	} {
		_, err := n.Lookup(ap(dst))
		wantReason(t, err, ReasonNotShimmed)
	}

	// A local interface address matches a wildcard listener.
	if a, ok := nonLoopbackAddr(); ok {
		lookupOne(t, n, netip.AddrPortFrom(a, 4002))
	}

	// Two addresses on one port share one file; references are counted.
	if err := n.Register(ap("[::1]:4001")); err != nil {
		t.Fatal(err)
	}
	if err := n.Register(ap("127.0.0.1:4001")); err != nil {
		t.Fatal(err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "l4001-*")); len(files) != 1 {
		t.Fatalf("entry files for port 4001: %v", files)
	}
	n.Unregister(ap("127.0.0.1:4001"))
	lookupOne(t, n, ap("127.0.0.1:4001")) // one reference left
	n.Unregister(ap("127.0.0.1:4001"))
	_, err = n.Lookup(ap("127.0.0.1:4001"))
	wantReason(t, err, ReasonNotShimmed)
	lookupOne(t, n, ap("[::1]:4001"))
	n.Unregister(ap("[::1]:4001"))
	if files, _ := filepath.Glob(filepath.Join(dir, "l4001-*")); len(files) != 0 {
		t.Fatalf("entry files left for port 4001: %v", files)
	}
	if err := n.Unregister(ap("[::1]:4001")); err == nil {
		t.Fatal("unregister of an unregistered address succeeded")
	}

	// Close removes everything the Node made.
	n.Close()
	if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) != 0 {
		t.Fatalf("left after Close: %v", files)
	}
}

func nonLoopbackAddr() (netip.Addr, bool) {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if p, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(p.IP); ok && ip.Unmap().Is4() && !ip.IsLoopback() {
				return ip.Unmap(), true
			}
		}
	}
	return netip.Addr{}, false
}

func TestLookupRemovesStaleEntries(t *testing.T) {
	dir := runDir(t)
	n := newNode(t, Config{RunDir: dir, Handler: echoHandler})
	if err := n.Register(ap("127.0.0.1:4100")); err != nil { // creates the directory
		t.Fatal(err)
	}

	// A child that registers and exits without cleaning up.
	h := startHelper(t, roleRegisterExit, "RV_DIR="+dir, "RV_ADDR=127.0.0.1:4101")
	if l := h.line(t); l != "ready" {
		t.Fatalf("helper: %q", l)
	}
	h.wait(t)
	deadPID := h.cmd.Process.Pid
	if files, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("l4101-%d-*", deadPID))); len(files) != 1 {
		t.Fatalf("helper's entry: %v", files)
	}
	_, err := n.Lookup(ap("127.0.0.1:4101"))
	wantReason(t, err, ReasonNotShimmed)
	if files, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("*%d*", deadPID))); len(files) != 0 {
		t.Fatalf("stale files left: %v", files)
	}
	if s := n.Stats(); s.StaleEntries != 1 {
		t.Fatalf("StaleEntries %d, want 1", s.StaleEntries)
	}

	// A well-formed file naming the dead pid; one naming this process
	// with another start time (a reused pid).
	_, myStart := processStart(os.Getpid())
	for _, e := range []entryFile{
		{port: 4102, owner: owner{pid: deadPID, start: 7, uid: uint32(os.Geteuid()), pidns: n.pidns,
			socket: filepath.Join(dir, sockName(deadPID, 1))}, listens: []netip.AddrPort{ap("127.0.0.1:4102")}},
		{port: 4102, owner: owner{pid: os.Getpid(), start: myStart + 1, uid: uint32(os.Geteuid()), pidns: n.pidns,
			socket: filepath.Join(dir, sockName(os.Getpid(), 2))}, listens: []netip.AddrPort{ap("127.0.0.1:4102")}},
	} {
		writeFile(t, filepath.Join(dir, entryName(e.port, e.pid, e.start, n.nsID)), string(e.encode()))
	}
	writeFile(t, filepath.Join(dir, sockName(deadPID, 1)), "") // its socket's leftover
	_, err = n.Lookup(ap("127.0.0.1:4102"))
	wantReason(t, err, ReasonNotShimmed)
	if s := n.Stats(); s.StaleEntries != 3 {
		t.Fatalf("StaleEntries %d, want 3", s.StaleEntries)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) != 2 {
		t.Fatalf("files left: %v (want this process's socket and entry)", files)
	}

	// Garbage: junk, a name that disagrees with the content, an oversized
	// file, a socket outside the run directory.
	good := entryFile{port: 4103, owner: owner{pid: os.Getpid(), start: myStart, uid: uint32(os.Geteuid()), pidns: n.pidns,
		socket: n.srv.path}, listens: []netip.AddrPort{ap("127.0.0.1:4103")}}
	outside := good
	outside.socket = "/tmp/" + sockName(os.Getpid(), 3)
	garbage := map[string]string{
		"l4103-1-1": "GET / HTTP/1.1\r\n\r\n",
		entryName(4103, os.Getpid(), myStart+5, n.nsID): string(good.encode()),
		"l4103-2-2": "sdpshim-rendezvous 1\n" + string(make([]byte, maxEntryFile)),
		entryName(4103, os.Getpid(), myStart, n.nsID): string(outside.encode()),
	}
	for name, content := range garbage {
		writeFile(t, filepath.Join(dir, name), content)
	}
	_, err = n.Lookup(ap("127.0.0.1:4103"))
	wantReason(t, err, ReasonNotShimmed)
	if s := n.Stats(); s.GarbageEntries != 4 {
		t.Fatalf("GarbageEntries %d, want 4", s.GarbageEntries)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "l4103-*")); len(files) != 0 {
		t.Fatalf("garbage left: %v", files)
	}

	// The live entry is untouched throughout.
	lookupOne(t, n, ap("127.0.0.1:4100"))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestProcessStart(t *testing.T) {
	st, start := processStart(os.Getpid())
	if st != procAlive || start == 0 {
		t.Fatalf("self: %v %d", st, start)
	}
	if st, _ := processStart(0); st != procDead {
		t.Fatal("pid 0 alive")
	}
	// Fields 4..21 are 18 numbers, then field 22, the start time.
	line := "42 (a) b) (c) S" + strings.Repeat(" 0", 18) + " 123456 1 2 3"
	if s, start, ok := parseStat([]byte(line)); !ok || s != 'S' || start != 123456 {
		t.Fatalf("parseStat: %c %d %v", s, start, ok)
	}
	if _, _, ok := parseStat([]byte("42 (x) S 1")); ok {
		t.Fatal("short stat line parsed")
	}
}
