package direct

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/rendezvous"
)

// FuzzArea drives both sides of an area with decoded operations while a
// hostile peer writes any bytes anywhere in it, between the operations.
// The area sits between two inaccessible pages (its end on the second),
// so a read or write outside it faults; no call may block (all are
// nonblocking), and every answer stays in range.
//
// Operations, one byte each, then their arguments:
//
//	0 OFF(2) LEN(1) BYTES   the peer writes BYTES at OFF (mod the size)
//	1 SIDE N(2)             SIDE sends N bytes
//	2 SIDE N(2)             SIDE receives up to N bytes (3: peeks)
//	4 SIDE                  SIDE sends its FIN (5: resets, 6: closes its
//	                        reading, 7: learns its peer is gone)
//	8 SIDE W(2)             SIDE sets its window to W
//	9 SIDE EV               SIDE arms for EV and polls
//	10 SIDE                 SIDE trims its blocks past the first SIDE>>1 % 4
func FuzzArea(f *testing.F) {
	f.Add([]byte{1, 0, 0, 200, 2, 1, 1, 0})
	f.Add([]byte{1, 0, 3, 0, 0, 0x40, 0x05, 4, 0xff, 0xff, 0xff, 0xff, 2, 1, 2, 0})
	f.Add([]byte{1, 1, 0, 50, 4, 1, 3, 0, 0, 100, 2, 0, 1, 0, 7, 0})
	f.Add([]byte{0, 0x02, 0x40, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 0, 1, 0, 2, 1, 1, 0, 9, 1, 1})
	f.Add([]byte{8, 1, 0, 10, 1, 0, 16, 0, 6, 1, 1, 0, 1, 0, 5, 0, 2, 1, 1, 0})
	// Side 0 sends a block, the peer sets a link in its header to block 0
	// (its flags at 652: the area's header, 576 bytes, direction 0's
	// status bytes, 64, then the block's stream, seq and len), side 1
	// reads it and looks for the next block there; then
	// the same with a flag that means nothing.
	f.Add([]byte{1, 0, 20, 0, 0, 0x8c, 0x02, 4, 1, 0, 0, 0, 2, 1, 64, 0, 1, 0, 20, 0, 2, 1, 64, 0})
	f.Add([]byte{1, 0, 20, 0, 0, 0x8c, 0x02, 4, 2, 0, 0, 0, 2, 1, 64, 0})
	// The peer holds side 1's receive lock in pid 1's name (a live
	// process): the nonblocking recv gives up after the lock's bound
	// (25 sleeps) with a reset instead of waiting for ever.
	f.Add([]byte{0, 140, 0, 4, 1, 0, 0, 0, 2, 1, 10, 0})
	// Side 0 fills the ring, side 1 reads it, side 0 trims (a look, then
	// the trim), sends again and side 1 reads it.
	f.Add([]byte{1, 0, 0x90, 0x01, 2, 1, 0x90, 0x01, 10, 0, 10, 0, 1, 0, 100, 0, 2, 1, 100, 0})
	// The peer writes a pid that names no process into side 0's receive
	// lock (dir[1].rx_lock, at 396), side 0 receives; thirty times. Each
	// cost 200 ms before a dead holder was freed before the first sleep.
	{
		var ops []byte
		for i := 0; i < 30; i++ {
			ops = append(ops, 0, 0x8c, 0x01, 4, 0x2a, 0x2a, 0x2a, 0x2a, 2, 0, 16, 0)
		}
		f.Add(ops)
	}
	// A live holder's lock word gives up after 25 sleeps: 5 s a call in
	// a process, 25 ms here, so that such inputs do not pass for hangs.
	defer setLockRound(setLockRound(time.Millisecond))
	f.Fuzz(func(t *testing.T, ops []byte) {
		const blocks, blockSize = 4, 128
		size := Size(blocks, blockSize)
		a, release := guardedArea(t, size)
		defer release()
		initArea(a.mem, blocks, blockSize)
		var sides [2]*Conn
		for s := range sides {
			c, err := Open(a, s)
			if err != nil {
				t.Fatal(err)
			}
			sides[s] = c
		}
		defer func() {
			for _, c := range sides {
				c.Free() // its Unmap fails on the test's slice: release unmaps
			}
		}()
		buf := make([]byte, 1<<16)
		next := func(n int) []byte {
			if len(ops) < n {
				ops = ops[len(ops):]
				return nil
			}
			b := ops[:n:n] // an append to it must not write into the ops after it
			ops = ops[n:]
			return b
		}
		for len(ops) > 0 {
			op := next(1)[0]
			switch op % 11 {
			case 0:
				h := next(3)
				if h == nil {
					return
				}
				off := int(binary.LittleEndian.Uint16(h)) % size
				copy(a.mem[off:], next(min(int(h[2]), len(ops))))
				continue
			}
			arg := next(1)
			if arg == nil {
				return
			}
			c := sides[arg[0]&1]
			switch op % 11 {
			case 1:
				n := int(binary.LittleEndian.Uint16(append(next(2), 0, 0)))
				if m, _, err := c.Send(buf[:n], false); m < 0 || m > n || (err != nil && m != 0) {
					t.Fatalf("send of %d: %d, %v", n, m, err)
				}
			case 2, 3:
				n := int(binary.LittleEndian.Uint16(append(next(2), 0, 0)))
				if m, _, err := c.Recv(buf[:n], op%11 == 3, false); m < 0 || m > n || (err != nil && m != 0) {
					t.Fatalf("recv of %d: %d, %v", n, m, err)
				}
			case 4:
				c.Fin()
			case 5:
				c.Reset()
			case 6:
				c.CloseRead()
			case 7:
				c.PeerGone()
			case 8:
				c.SetWindow(int(binary.LittleEndian.Uint16(append(next(2), 0, 0))))
			case 9:
				ev := int16(arg[0]>>1) & (unix.POLLIN | unix.POLLOUT)
				c.Arm(ev, int(arg[0]&63))
			case 10:
				if n := c.Trim(int(arg[0]>>1) % 4); n < 0 || n > size {
					t.Fatalf("trim gave back %d bytes of an area of %d", n, size)
				}
			}
			if q := c.Inq(); q < 0 || q > size {
				t.Fatalf("inq %d of an area of %d bytes", q, size)
			}
			if q := c.Outq(); q < 0 || q > size {
				t.Fatalf("outq %d of an area of %d bytes", q, size)
			}
			c.Poll()
		}
	})
}

// guardedArea maps size bytes (a multiple of 64) shared and anonymous,
// ending on an inaccessible page and with one before it.
func guardedArea(t *testing.T, size int) (*Area, func()) {
	t.Helper()
	page := unix.Getpagesize()
	span := (size+page-1)/page*page + 2*page
	mem, err := unix.Mmap(-1, 0, span, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	if unix.Mprotect(mem[:page], unix.PROT_NONE) != nil || unix.Mprotect(mem[span-page:], unix.PROT_NONE) != nil {
		t.Fatal("mprotect")
	}
	end := span - page
	return &Area{mem: mem[end-size : end : end], fd: -1}, func() { unix.Munmap(mem) }
}

// initArea writes a fresh area's header (direct.h, struct sdp_darea):
// magic, version, nblocks, block_size, stream, then the size at 32.
func initArea(mem []byte, blocks, blockSize int) {
	le := binary.LittleEndian
	le.PutUint32(mem[0:], 0x44504453)
	le.PutUint32(mem[4:], areaVersion)
	le.PutUint32(mem[8:], uint32(blocks))
	le.PutUint32(mem[12:], uint32(blockSize))
	le.PutUint32(mem[16:], 7)
	le.PutUint64(mem[32:], uint64(len(mem)))
}

// FuzzBoard writes any bytes as a tenant board (preload/c/tenant.h),
// each entry's time taken as an age before now (so that small values are
// fresh entries and negative ones lie in the future), and has a bulk
// stream take its turns through it: the gate's cap stays between 1 and
// every turn, the stream's bytes arrive whole, and nothing waits
// unbounded (a lone stream of this process always finds its turn). The
// Go core's decoder of the board has its own (core/rendezvous,
// FuzzDecodeBoard).
func FuzzBoard(f *testing.F) {
	le := binary.LittleEndian
	head := make([]byte, entryAt)
	le.PutUint32(head, boardMagic)
	le.PutUint32(head[4:], boardVersion)
	le.PutUint32(head[8:], uint32(boardEntries))
	entry := func(pid, demand int, age time.Duration) []byte {
		return rendezvous.TenantEntry{PID: pid, Demand: demand, Beat: age}.Bytes()
	}
	f.Add(head)
	f.Add(append(append([]byte{}, head...), entry(1, 1, 1000)...))
	f.Add(append(append(append([]byte{}, head...), entry(1, 0xffffffff, 0)...), entry(2, 3, -5)...))
	f.Add(append(append([]byte{}, head...), make([]byte, boardSize)...)) // longer than a board: read up to its size
	f.Add([]byte("not a board"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 2*boardSize {
			b = b[:2*boardSize]
		}
		now := int64(rendezvous.BoardNow())
		b = append([]byte{}, b...)
		for at := entryAt; at+entrySize <= len(b) && at+entrySize <= boardSize; at += entrySize {
			le.PutUint64(b[at+8:], uint64(now-int64(le.Uint64(b[at+8:]))))
		}
		path := filepath.Join(t.TempDir(), "board")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Open(path, unix.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		time.Sleep(time.Millisecond) // past the gate's last look
		tx, rx := pair(t, 4, 4096)
		tx.SetPreempt(true)
		tx.SetBoard(fd)
		errs := make(chan error, 1)
		go func() { errs <- receive(rx, 64<<10) }()
		if err := send(tx, 64<<10, nil); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the stream did not arrive")
		}
		if c, _, _ := turns(); c < 1 || c > 256 {
			t.Fatalf("cap %d", c)
		}
	})
}
