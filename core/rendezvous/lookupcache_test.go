package rendezvous

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestLookupCache: a lookup in a run directory that has not changed for a
// while is answered from the cache (the entry files are not read again),
// and any change of the directory (a listener registering, another
// closing) is seen by the next lookup.
func TestLookupCache(t *testing.T) {
	dir := runDir(t)
	srv := newNode(t, Config{RunDir: dir, Handler: echoHandler})
	if err := srv.Register(ap("127.0.0.1:4000")); err != nil {
		t.Fatal(err)
	}
	var old time.Time
	age := func() { // the directory as if it had been quiet for a second
		old = time.Now().Add(-time.Second)
		if err := os.Chtimes(dir, old, old); err != nil {
			t.Fatal(err)
		}
	}
	age()
	cli := newNode(t, Config{RunDir: dir, Handler: echoHandler})
	if e, err := cli.Lookup(ap("127.0.0.1:4000")); err != nil || len(e) != 1 {
		t.Fatalf("first lookup: %v %v", e, err)
	}
	_, err := cli.Lookup(ap("127.0.0.1:4001"))
	wantReason(t, err, ReasonNotShimmed)

	// Answered from the cache: with the entry file moved away (and the
	// directory's time put back) a scan would find nothing.
	entries, _ := filepath.Glob(filepath.Join(dir, "l4000-*"))
	if len(entries) != 1 {
		t.Fatalf("entries %v", entries)
	}
	if err := os.Rename(entries[0], entries[0]+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
	e, err := cli.Lookup(ap("127.0.0.1:4000"))
	if err != nil || len(e) != 1 {
		t.Fatalf("cached lookup: %v %v", e, err)
	}
	if err := os.Rename(entries[0]+".away", entries[0]); err != nil {
		t.Fatal(err)
	}
	age()
	if e, err := cli.Lookup(ap("127.0.0.1:4000")); err != nil || len(e) != 1 {
		t.Fatalf("lookup after the move back: %v %v", e, err)
	}
	e[0].Socket = "scribbled" // the caller's copy
	if e, _ := cli.Lookup(ap("127.0.0.1:4000")); len(e) != 1 || e[0].Socket == "scribbled" {
		t.Fatalf("the cache handed out its own entries: %v", e)
	}

	// Deferral records come and go in the record directory: once the
	// first one has started the connector's server and made that
	// directory, the run directory, and so the cached answer, stays as it
	// was.
	deferOnce := func(port string) {
		d, err := cli.Defer(Tuple{Client: ap("127.0.0.1:" + port), Server: ap("127.0.0.1:4000")}, -1)
		if err != nil {
			t.Fatal(err)
		}
		cli.Undefer(d)
	}
	deferOnce("5554")
	age()
	cli.Lookup(ap("127.0.0.1:4000"))
	before := stampRunDir(dir)
	deferOnce("5555")
	if after := stampRunDir(dir); after != before {
		t.Fatalf("a deferral changed the run directory: %+v, then %+v", before, after)
	}
	if err := os.Rename(entries[0], entries[0]+".away"); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(dir, old, old)
	e, err = cli.Lookup(ap("127.0.0.1:4000"))
	if err != nil || len(e) != 1 {
		t.Fatalf("lookup after a deferral, from the cache: %v %v", e, err)
	}
	if err := os.Rename(entries[0]+".away", entries[0]); err != nil {
		t.Fatal(err)
	}
	age()

	// A listener registering on a port cached as not shimmed is found
	// at once, however recent the change.
	if err := srv.Register(ap("127.0.0.1:4001")); err != nil {
		t.Fatal(err)
	}
	if e, err := cli.Lookup(ap("127.0.0.1:4001")); err != nil || len(e) != 1 {
		t.Fatalf("lookup after a registration: %v %v", e, err)
	}
	// And one that closes is gone at once.
	age()
	cli.Lookup(ap("127.0.0.1:4000"))
	if err := srv.Unregister(ap("127.0.0.1:4000")); err != nil {
		t.Fatal(err)
	}
	_, err = cli.Lookup(ap("127.0.0.1:4000"))
	wantReason(t, err, ReasonNotShimmed)
}

// An answer read from a directory changed less than stableAfter before
// the lookup began is not kept (a later change may keep its time); one
// from a directory unchanged for longer is.
func TestLookupCacheRecentChange(t *testing.T) {
	now := time.Now()
	for _, ago := range []time.Duration{0, 10 * time.Millisecond, stableAfter / 2, stableAfter - time.Millisecond} {
		m := now.Add(-ago)
		st := dirStamp{dev: 1, ino: 2, mtime: unix.NsecToTimespec(m.UnixNano()), ok: true}
		var c lookupCache
		c.put(st, st, now, ap("127.0.0.1:80"), nil)
		if _, ok := c.get(st, ap("127.0.0.1:80")); ok {
			t.Errorf("an answer from a directory changed %v before the lookup was kept", ago)
		}
	}
	st := dirStamp{dev: 1, ino: 2, mtime: unix.NsecToTimespec(now.Add(-2 * stableAfter).UnixNano()), ok: true}
	var c lookupCache
	c.put(st, st, now, ap("127.0.0.1:80"), nil)
	if _, ok := c.get(st, ap("127.0.0.1:80")); !ok {
		t.Error("an answer from a directory unchanged for twice stableAfter was not kept")
	}
}
