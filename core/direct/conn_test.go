package direct

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pair opens both sides of a fresh area, the second through the memfd as
// a peer process would.
func pair(t *testing.T, blocks, size int) (*Conn, *Conn) {
	t.Helper()
	a, err := NewArea(blocks, size, 3)
	if err != nil {
		t.Fatal(err)
	}
	b, err := MapArea(a.FD())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := Open(a, 0)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := Open(b, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ca.Free(); cb.Free() })
	return ca, cb
}

func TestSendRecv(t *testing.T) {
	a, b := pair(t, 4, 256)
	msg := bytes.Repeat([]byte("0123456789"), 100)
	n, sl, err := a.Send(msg, true)
	if n != 4*(256-HeaderSize) || sl != nil || err != nil {
		t.Fatalf("send: %d %v %v", n, sl, err)
	}
	if _, _, err := a.Send(msg[n:], false); !errors.Is(err, ErrWouldBlock) {
		t.Fatalf("full send: %v", err)
	}
	got := make([]byte, 1000)
	m, _, err := b.Recv(got, true, false)
	if m != n || err != nil || !bytes.Equal(got[:m], msg[:n]) {
		t.Fatalf("peek: %d %v", m, err)
	}
	if b.Inq() != n || a.Outq() != n {
		t.Fatalf("inq %d outq %d", b.Inq(), a.Outq())
	}
	m, _, err = b.Recv(got, false, false)
	if m != n || err != nil || !bytes.Equal(got[:m], msg[:n]) {
		t.Fatalf("recv: %d %v", m, err)
	}
	if _, sl, err := b.Recv(got, false, true); sl == nil || err != nil {
		t.Fatalf("empty blocking recv: %v %v", sl, err)
	} else {
		b.Woke(sl)
	}
	a.Fin()
	if m, _, err := b.Recv(got, false, true); m != 0 || err != nil {
		t.Fatalf("eof: %d %v", m, err)
	}
	if _, _, err := a.Send(msg, true); err != unix.EPIPE {
		t.Fatalf("send after fin: %v", err)
	}
	a.Reset()
	if _, _, err := b.Send(msg, true); err != unix.ECONNRESET {
		t.Fatalf("send after reset: %v", err)
	}
}

// TestSleepWake: a blocked receiver's Sleep is ended by the peer's send.
func TestSleepWake(t *testing.T) {
	a, b := pair(t, 8, 1024)
	b.SetPolling(0, 0)
	buf := make([]byte, 64)
	_, sl, err := b.Recv(buf, false, true)
	if sl == nil || err != nil {
		t.Fatalf("recv: %v %v", sl, err)
	}
	done := make(chan struct{})
	go func() {
		ts := unix.Timespec{Sec: 5}
		unix.Syscall6(unix.SYS_FUTEX, uintptrOf(sl.Word), 0 /* FUTEX_WAIT */, uintptr(sl.Val), uintptrOfTS(&ts), 0, 0)
		close(done)
	}()
	time.Sleep(20 * time.Millisecond)
	if _, _, err := a.Send([]byte("x"), true); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("the sleeper was not woken")
	}
	b.Woke(sl)
	if n, _, _ := b.Recv(buf, false, false); n != 1 {
		t.Fatalf("recv after wake: %d", n)
	}
}

func TestMapAreaRejects(t *testing.T) {
	fd, _ := unix.MemfdCreate("x", unix.MFD_CLOEXEC)
	defer unix.Close(fd)
	unix.Ftruncate(fd, 1<<16)
	if _, err := MapArea(fd); err == nil {
		t.Fatal("an unsealed memfd was mapped")
	}
	if _, err := NewArea(3, 256, 1); !errors.Is(err, ErrGeometry) {
		t.Fatalf("3 blocks: %v", err)
	}
}

// BenchmarkSendRecv moves 64-byte messages through one area, sender and
// receiver on one goroutine: the cost of the calls themselves, with no
// wait. It must not allocate.
func BenchmarkSendRecv(b *testing.B) {
	a, err := NewArea(64, 16384, 1)
	if err != nil {
		b.Fatal(err)
	}
	peer, err := MapArea(a.FD())
	if err != nil {
		b.Fatal(err)
	}
	ca, _ := Open(a, 0)
	cb, _ := Open(peer, 1)
	defer ca.Free()
	defer cb.Free()
	msg, got := make([]byte, 64), make([]byte, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if n, _, err := ca.Send(msg, false); n != 64 || err != nil {
			b.Fatalf("send %d %v", n, err)
		}
		if n, _, err := cb.Recv(got, false, false); n != 64 || err != nil {
			b.Fatalf("recv %d %v", n, err)
		}
	}
}

// TestSmallSendsShareBlocks: small sends the receiver has not read share
// blocks, as small writes share a kernel socket buffer: the sender appends
// to its last block while the receiver is at least one block behind it
// (a receiver keeping up gets a fresh block per send, as before) and a
// block is free (a full ring refuses small sends, as a full send buffer
// does). So 4 blocks hold 1+2*(256-16)+1 one-byte sends, not 4. Bytes
// arrive in order through partial reads and peeks.
func TestSmallSendsShareBlocks(t *testing.T) {
	a, b := pair(t, 4, 256)
	capacity := 2 + 2*(256-HeaderSize)
	var sent []byte
	for i := 0; ; i++ {
		c := []byte{byte(i)}
		n, _, err := a.Send(c, false)
		if errors.Is(err, ErrWouldBlock) {
			break
		}
		if n != 1 || err != nil {
			t.Fatalf("send %d: %d %v", i, n, err)
		}
		sent = append(sent, c...)
	}
	if len(sent) != capacity {
		t.Fatalf("the ring took %d one-byte sends, want %d", len(sent), capacity)
	}
	if b.Inq() != capacity || a.Outq() != capacity {
		t.Fatalf("inq %d outq %d, want %d", b.Inq(), a.Outq(), capacity)
	}
	got := make([]byte, capacity)
	m, _, err := b.Recv(got[:10], false, false)
	if m != 10 || err != nil {
		t.Fatalf("partial recv: %d %v", m, err)
	}
	// The first block (one byte) is free again: one more send fits.
	if n, _, err := a.Send([]byte{7}, false); n != 1 || err != nil {
		t.Fatalf("send after a block was freed: %d %v", n, err)
	}
	sent = append(sent, 7)
	got = append(got, 0)
	n, _, err := b.Recv(got[10:], false, false)
	if n != capacity+1-10 || err != nil || !bytes.Equal(got, sent) {
		t.Fatalf("recv the rest: %d %v (bytes equal: %v)", n, err, bytes.Equal(got, sent))
	}

	// Appends around partial reads and peeks.
	var want []byte
	send := func(s string) {
		t.Helper()
		if n, _, err := a.Send([]byte(s), false); n != len(s) || err != nil {
			t.Fatalf("send %q: %d %v", s, n, err)
		}
		want = append(want, s...)
	}
	recv := func(peek bool, n int) string {
		t.Helper()
		m, _, err := b.Recv(got[:n], peek, false)
		if err != nil {
			t.Fatalf("recv: %v", err)
		}
		return string(got[:m])
	}
	send("a")
	send("bc")
	send("de") // appended: the receiver is a block behind
	if r := recv(false, 2); r != "ab" {
		t.Fatalf("partial read: %q", r)
	}
	send("f") // the receiver is in the last block: a fresh one
	if r := recv(true, 64); r != "cdef" {
		t.Fatalf("peek: %q", r)
	}
	send("gh") // appended to "f", past a peek
	if r := recv(false, 64); r != "cdefgh" {
		t.Fatalf("read: %q", r)
	}
	if b.Inq() != 0 || a.Outq() != 0 {
		t.Fatalf("inq %d outq %d after reading everything", b.Inq(), a.Outq())
	}
}

// TestArmHeld: an arm holds until the peer's next ring spends it; a word
// another bell armed is not this sleeper's, and a word two bells merged
// into the socket's ring holds for both.
func TestArmHeld(t *testing.T) {
	a, b := pair(t, 8, 1024)
	if b.ArmHeld(unix.POLLIN, 5) {
		t.Fatal("held before any arm")
	}
	if ev := b.Arm(unix.POLLIN, 5); ev != 0 {
		t.Fatalf("arm: ready %#x", ev)
	}
	if !b.ArmHeld(unix.POLLIN, 5) {
		t.Fatal("not held after the arm")
	}
	if b.ArmHeld(unix.POLLIN, 6) {
		t.Fatal("bell 5's arm held for bell 6")
	}
	if b.ArmHeld(unix.POLLIN|unix.POLLOUT, 5) {
		t.Fatal("held for room that was never armed")
	}
	if _, _, err := a.Send([]byte("x"), true); err != nil {
		t.Fatal(err)
	}
	if b.ArmHeld(unix.POLLIN, 5) {
		t.Fatal("held after the peer's ring spent it")
	}
	buf := make([]byte, 8)
	if n, _, _ := b.Recv(buf, false, false); n != 1 {
		t.Fatalf("recv: %d", n)
	}
	b.Arm(unix.POLLIN, 5)
	b.Arm(unix.POLLIN, 7) // two bells: the word becomes the socket's ring
	if !b.ArmHeld(unix.POLLIN, 5) || !b.ArmHeld(unix.POLLIN, 7) || !b.ArmHeld(unix.POLLIN, 0) {
		t.Fatal("a merged arm not held for its sleepers")
	}
	if !b.ArmHeld(unix.POLLIN, MaxBells+3) {
		t.Fatal("a bell number past the table is the socket's ring")
	}
	if _, _, err := a.Send([]byte("y"), true); err != nil {
		t.Fatal(err)
	}
	if b.ArmHeld(unix.POLLIN, 0) {
		t.Fatal("the socket's ring held after it was spent")
	}
	if n, _, _ := b.Recv(buf, false, false); n != 1 {
		t.Fatalf("recv: %d", n)
	}
	// Room: armed while the area is full, spent by the reader's release.
	if n, _, err := a.Send(make([]byte, 8*1024), false); n == 0 || err != nil {
		t.Fatalf("fill: %d %v", n, err)
	}
	if ev := a.Arm(unix.POLLOUT, 9); ev&unix.POLLOUT != 0 || !a.ArmHeld(unix.POLLOUT, 9) {
		t.Fatalf("room armed: ready %#x, held %v", ev, a.ArmHeld(unix.POLLOUT, 9))
	}
	if n, _, _ := b.Recv(make([]byte, 8*1024), false, false); n == 0 {
		t.Fatal("nothing to read")
	}
	if a.ArmHeld(unix.POLLOUT, 9) {
		t.Fatal("room's arm held after the release spent it")
	}
}

// TestPublishAsPeer: bytes the receiving side publishes as its peer come
// before what the peer sends after, the peer's counts include them (its
// unread bytes, the window), and what does not fit is left to the caller;
// TakeBack reads a side's unread bytes back as its peer would.
func TestPublishAsPeer(t *testing.T) {
	a, b := pair(t, 4, 256)
	first := bytes.Repeat([]byte("early-"), 50) // 300 bytes: two blocks
	if n := b.PublishAsPeer(first); n != len(first) {
		t.Fatalf("published %d of %d", n, len(first))
	}
	if a.Outq() != len(first) || b.Inq() != len(first) {
		t.Fatalf("after the publish: outq %d inq %d", a.Outq(), b.Inq())
	}
	if n, _, err := a.Send([]byte("then the peer"), false); n != 13 || err != nil {
		t.Fatalf("peer send: %d %v", n, err)
	}
	got := make([]byte, 1024)
	n := 0
	for n < len(first)+13 {
		m, _, err := b.Recv(got[n:], false, false)
		if err != nil {
			t.Fatalf("recv after %d: %v", n, err)
		}
		n += m
	}
	if want := append(append([]byte{}, first...), "then the peer"...); !bytes.Equal(got[:n], want) {
		t.Fatalf("read %q", got[:n])
	}
	big := bytes.Repeat([]byte{7}, 4*(256-HeaderSize)+100)
	if n := b.PublishAsPeer(big); n != 4*(256-HeaderSize) {
		t.Fatalf("published %d into 4 free blocks of %d", n, 256-HeaderSize)
	}
	if back := a.TakeBack(2000); len(back) != 4*(256-HeaderSize) || !bytes.Equal(back, big[:len(back)]) {
		t.Fatalf("took back %d bytes", len(back))
	}
	if b.Inq() != 0 {
		t.Fatalf("inq %d after the take-back", b.Inq())
	}
}

// TestLinksKeepPagesFew: a sender whose receiver keeps up fills the ring's first
// blocks only (each links to the lowest free block), so the other
// blocks' pages are never touched; a send into the empty ring still takes
// every block.
func TestLinksKeepPagesFew(t *testing.T) {
	const blocks, size = 64, 16 << 10
	a, b := pair(t, blocks, size)
	msg, got := bytes.Repeat([]byte("q"), 100), make([]byte, 100)
	roundTrip := func(from, to *Conn) {
		if n, _, err := from.Send(msg, false); n != len(msg) || err != nil {
			t.Fatalf("send: %d %v", n, err)
		}
		if n, _, err := to.Recv(got, false, false); n != len(msg) || err != nil {
			t.Fatalf("recv: %d %v", n, err)
		}
	}
	for i := 0; i < 1000; i++ {
		roundTrip(a, b)
		roundTrip(b, a)
	}
	// The header's page, and per direction its status bytes and the
	// first two blocks' first pages: 2000 messages each way, in 5 pages
	// of the area's 514 (before the links, one page of every block).
	if n := residentPages(t, a.Area().mem); n > 8 {
		t.Fatalf("%d pages resident after a ping-pong of small messages", n)
	}
	// A send into the empty ring takes all of it.
	big := make([]byte, blocks*(size-HeaderSize))
	if n, _, err := a.Send(big, false); n != len(big) || err != nil {
		t.Fatalf("a send into the empty ring took %d of %d bytes (%v)", n, len(big), err)
	}
}

// residentPages counts the pages of mem that are in memory.
func residentPages(t *testing.T, mem []byte) int {
	t.Helper()
	page := unix.Getpagesize()
	vec := make([]byte, (len(mem)+page-1)/page)
	// x/sys/unix has no mincore for Linux.
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// TestTrim: a burst fills the ring; once the peer has read it and the
// sender stayed quiet from one Trim to the next, the blocks past the
// first two give their pages back, blocks still unread keep theirs and
// their bytes, and the stream goes on intact over the blocks given back.
func TestTrim(t *testing.T) {
	const blocks, size, keep = 64, 16 << 10, 2
	a, b := pair(t, blocks, size)
	room := size - HeaderSize
	burst := func(seed byte) []byte {
		m := make([]byte, blocks*room)
		for i := range m {
			m[i] = byte(i*7) + seed
		}
		if n, _, err := a.Send(m, false); n != len(m) || err != nil {
			t.Fatalf("send: %d of %d (%v)", n, len(m), err)
		}
		return m
	}
	read := func(want []byte) {
		got := make([]byte, len(want))
		if n, _, err := b.Recv(got, false, false); n != len(want) || err != nil || !bytes.Equal(got, want) {
			t.Fatalf("recv: %d of %d (%v), equal %v", n, len(want), err, bytes.Equal(got[:n], want[:n]))
		}
	}
	m := burst(1)
	if n := a.Trim(keep); n != 0 {
		t.Fatalf("the first trim after a send gave back %d bytes: it only looks", n)
	}
	// Half read: the other half is in flight and keeps its pages.
	read(m[:len(m)/2])
	full := residentPages(t, a.Area().mem)
	given := a.Trim(keep)
	page := unix.Getpagesize()
	// Blocks 2 to 31, less the pages they share with their neighbours.
	if low := (blocks/2 - keep - 1) * room; given < low || given%page != 0 {
		t.Fatalf("trim gave back %d bytes, want at least %d in whole pages", given, low)
	}
	if n := residentPages(t, a.Area().mem); n != full-given/page {
		t.Fatalf("%d pages resident after the trim, want %d", n, full-given/page)
	}
	read(m[len(m)/2:])
	if n := a.Trim(keep); n < (blocks/2-1)*room {
		t.Fatalf("the second half read, trim gave back %d bytes", n)
	}
	if n := residentPages(t, a.Area().mem); n > full/2 {
		t.Fatalf("%d pages resident after the ring drained, of %d", n, full)
	}
	if st := a.Stats(); st.Trimmed == 0 {
		t.Fatal("no trimmed bytes counted")
	}
	// The stream goes on over the blocks given back, and a send since
	// the last look is not quiet.
	read(burst(2))
	if n := a.Trim(keep); n != 0 {
		t.Fatalf("a trim right after a send gave back %d bytes", n)
	}
	read(burst(3))
}

// TestTrimWhileStreaming: trims race a stream of random-sized sends that
// pause now and then (every pause a quiet spell the trimmer meets), and
// every byte arrives in order: a trim never gives back a block in flight
// nor one a send is filling.
func TestTrimWhileStreaming(t *testing.T) {
	const total = 32 << 20
	a, b := pair(t, 64, 16<<10)
	pattern := func(i int) byte { return byte(i*131 + i>>11) }
	done := make(chan struct{})
	trims := 0
	go func() {
		defer close(done)
		for stop := false; !stop; {
			select {
			case <-done:
				stop = true
			default:
			}
			if a.Trim(0) > 0 {
				trims++
			}
			time.Sleep(20 * time.Microsecond)
		}
	}()
	sendErr := make(chan error, 1)
	go func() {
		msg := make([]byte, 64<<10)
		for sent, k := 0, 0; sent < total; k++ {
			n := min(1+(k*7919)%len(msg), total-sent)
			for i := range msg[:n] {
				msg[i] = pattern(sent + i)
			}
			for off := 0; off < n; {
				m, _, err := a.Send(msg[off:n], false)
				if err != nil && !errors.Is(err, ErrWouldBlock) {
					sendErr <- err
					return
				}
				off += m
			}
			sent += n
			if k%8 == 0 {
				time.Sleep(2 * time.Millisecond) // quiet: the trimmer's two looks meet no send
			}
		}
		sendErr <- nil
	}()
	buf := make([]byte, 48<<10)
	for got := 0; got < total; {
		n, _, err := b.Recv(buf, false, false)
		if err != nil && !errors.Is(err, ErrWouldBlock) {
			t.Fatalf("recv at %d: %v", got, err)
		}
		for i := range buf[:n] {
			if buf[i] != pattern(got+i) {
				t.Fatalf("byte %d: %#x, want %#x", got+i, buf[i], pattern(got+i))
			}
		}
		got += n
	}
	if err := <-sendErr; err != nil {
		t.Fatal(err)
	}
	done <- struct{}{}
	<-done
	if trims == 0 {
		t.Fatal("no trim gave anything back while the stream paused")
	}
	t.Logf("%d trims gave pages back during %d MiB", trims, total>>20)
}

// TestDeadLockHolder: a side lock whose word names no live process (a
// fork child killed inside a call, or a peer's garbage) is taken over at
// the first wait, not after a sleep: thirty receives, each after the
// peer wrote a dead pid into the receive lock, take far less than one
// 200 ms sleep each, and the connection goes on.
func TestDeadLockHolder(t *testing.T) {
	a, b := pair(t, 4, 256)
	// Side 0's receive lock, dir[1].rx_lock (direct.h): the area's first
	// line, dir[0]'s four lines, dir[1]'s sender line, then rx_next,
	// rx_seq and rx_off.
	const rxLock = 64 + 4*64 + 64 + 12
	buf := make([]byte, 16)
	start := time.Now()
	for i := 0; i < 30; i++ {
		binary.LittleEndian.PutUint32(a.Area().mem[rxLock:], 0x2a2a2a2a)
		if n, _, err := a.Recv(buf, false, false); n != 0 || !errors.Is(err, ErrWouldBlock) {
			t.Fatalf("recv %d: %d, %v", i, n, err)
		}
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("thirty receives past a dead holder's lock took %v", d)
	}
	if n, _, err := b.Send([]byte("x"), false); n != 1 || err != nil {
		t.Fatalf("send: %d %v", n, err)
	}
	if n, _, err := a.Recv(buf, false, false); n != 1 || err != nil || buf[0] != 'x' {
		t.Fatalf("recv after: %d %v", n, err)
	}
}

// TestLinkChain: blocks left unread across a link back to the ring's
// first are counted once, by Inq, a peek and a peer's death, and the
// chain of blocks in the order they were filled ends at a free block or
// at one whose seq is behind, which is no protocol violation.
func TestLinkChain(t *testing.T) {
	a, b := pair(t, 4, 256)
	msg := func(c byte) []byte { return bytes.Repeat([]byte{c}, 100) }
	got := make([]byte, 1000)
	if n, _, err := a.Send(msg('a'), false); n != 100 || err != nil {
		t.Fatalf("send: %d %v", n, err)
	}
	if n, _, err := b.Recv(got, false, false); n != 100 || err != nil {
		t.Fatalf("recv: %d %v", n, err)
	}
	// The second block links back to the first, read and free: the
	// third goes there, with the second still unread before it.
	for _, c := range []byte("bc") {
		if n, _, err := a.Send(msg(c), false); n != 100 || err != nil {
			t.Fatalf("send %c: %d %v", c, n, err)
		}
	}
	want := append(msg('b'), msg('c')...)
	if q := b.Inq(); q != 200 {
		t.Fatalf("inq %d, want 200", q)
	}
	if n, _, err := b.Recv(got, true, false); n != 200 || err != nil || !bytes.Equal(got[:n], want) {
		t.Fatalf("peek: %d %v", n, err)
	}
	b.PeerGone()
	n := 0
	for {
		m, _, err := b.Recv(got[n:], false, false)
		if err != nil {
			t.Fatalf("recv after %d: %v", n, err)
		}
		if m == 0 {
			break
		}
		n += m
	}
	if !bytes.Equal(got[:n], want) {
		t.Fatalf("read %q before the EOF", got[:n])
	}
}

// TestCapacityAfterSmallMessages: the ring's blocks are all the sender's
// to fill, whatever came before: after one small message the receiver
// read and one it has not, a large send still takes every free block,
// as a kernel socket's buffer takes a write that fits it. A program that
// writes a request in pieces and reads the answer only after the last
// (or one thread that writes before it reads, as selfpair does) would
// otherwise wait for a read that never comes. A ring that wrapped early
// to keep its pages few (tried 2026-12-01: docs/direct.md, "The area")
// failed this: the big send took one block.
func TestCapacityAfterSmallMessages(t *testing.T) {
	const blocks, size = 64, 16 << 10
	a, b := pair(t, blocks, size)
	got := make([]byte, 100)
	if n, _, err := a.Send(bytes.Repeat([]byte("a"), 100), false); n != 100 || err != nil {
		t.Fatalf("send: %d %v", n, err)
	}
	if n, _, err := b.Recv(got, false, false); n != 100 || err != nil {
		t.Fatalf("recv: %d %v", n, err)
	}
	if n, _, err := a.Send(bytes.Repeat([]byte("b"), 100), false); n != 100 || err != nil {
		t.Fatalf("send: %d %v", n, err)
	}
	big := make([]byte, blocks*(size-HeaderSize))
	n, _, err := a.Send(big, false)
	if err != nil || n < (blocks-2)*(size-HeaderSize) {
		t.Fatalf("a large send beside one unread small message took %d bytes (%v): want every free block's, %d", n, err, (blocks-1)*(size-HeaderSize))
	}
}

// TestReach: a blocking send keeps within the reach (64 blocks' bytes) of
// a reader that reads on, and takes the whole ring from a reader that
// does not, as a kernel socket's buffer does; a nonblocking send has the
// whole ring at once (preload/c/direct.c, "The reach").
func TestReach(t *testing.T) {
	const blocks, size = 256, 16 << 10
	payload := size - HeaderSize
	reach, ring := 64*payload, blocks*payload
	big := make([]byte, ring)
	for i := range big {
		big[i] = byte(i * 7)
	}
	t.Run("reader reads on", func(t *testing.T) {
		a, b := pair(t, blocks, size)
		if n, _, err := a.Send(big, true); n != reach || err != nil {
			t.Fatalf("first blocking send: %d %v, want the reach's %d", n, err, reach)
		}
		got := make([]byte, payload)
		if n, _, err := b.Recv(got, false, false); n != payload || err != nil || !bytes.Equal(got, big[:payload]) {
			t.Fatalf("recv: %d %v", n, err)
		}
		// The reader took a block: the send stays within the reach.
		if n, _, err := a.Send(big[reach:], true); n != payload || err != nil {
			t.Fatalf("send after a read: %d %v, want one block's %d", n, err, payload)
		}
	})
	t.Run("reader does not read", func(t *testing.T) {
		a, b := pair(t, blocks, size)
		done := 0
		for done < ring {
			n, _, err := a.Send(big[done:], true)
			if n <= 0 || err != nil {
				t.Fatalf("blocking send after %d of %d bytes: %d %v", done, ring, n, err)
			}
			done += n
		}
		got := make([]byte, ring)
		for off := 0; off < ring; {
			n, _, err := b.Recv(got[off:], false, false)
			if n <= 0 || err != nil {
				t.Fatalf("recv after %d of %d bytes: %d %v", off, ring, n, err)
			}
			off += n
		}
		if !bytes.Equal(got, big) {
			t.Fatal("the ring's bytes differ from the sent")
		}
	})
	t.Run("nonblocking", func(t *testing.T) {
		a, _ := pair(t, blocks, size)
		if n, _, err := a.Send(big, false); n != ring || err != nil {
			t.Fatalf("nonblocking send: %d %v, want the whole ring's %d", n, err, ring)
		}
	})
}
