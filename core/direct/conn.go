package direct

/*
#include "../../preload/c/direct.h"
#include <stdlib.h>
#include <poll.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

static uint32_t ld32(uint32_t *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
static void st32(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }
static void st64(int64_t *p, int64_t v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }
static uint64_t ld64(uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static uint32_t xchg32(uint32_t *p, uint32_t v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
static void add64(uint64_t *p, uint64_t v) { __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
static long sdp_dlock_round_set(long ns) { return __atomic_exchange_n(&sdp_dlock_round_ns, ns, __ATOMIC_RELAXED); }

// A data call's answer by value (no Go pointer goes to C: nothing escapes).
struct dres {
	long r;
	uint32_t *word;
	uint32_t val;
	int what;
};

static struct dres dres_of(long r, const struct sdp_dsleep *sl)
{
	struct dres d = {.r = r, .word = sl->word, .val = sl->val, .what = sl->what};
	return d;
}

static struct dres go_send(struct sdp_dconn *c, void *b, size_t n, int f)
{
	struct sdp_dsleep sl = {0};
	long r = sdp_dconn_send(c, b, n, f, &sl);
	return dres_of(r, &sl);
}

static struct dres go_recv(struct sdp_dconn *c, void *b, size_t n, int f)
{
	struct sdp_dsleep sl = {0};
	long r = sdp_dconn_recv(c, b, n, f, &sl);
	return dres_of(r, &sl);
}

*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Errors of the data calls.
var (
	// ErrWouldBlock: nothing to read (or no room) and the call may not
	// sleep.
	ErrWouldBlock = errors.New("direct: would block")
)

// Slow bits (Conn.SetSlow): the calls the interposer hands to the core.
const (
	SlowRecv = C.SDP_DSLOW_RECV
	SlowSend = C.SDP_DSLOW_SEND
)

// Conn is this process's handle on one side of an area. The handle is C
// memory: the interposer keeps its address (Ptr) and makes the program's
// data calls on it without entering Go.
type Conn struct {
	mu   sync.RWMutex // held (read) by every call into c; Free takes it to free
	c    *C.struct_sdp_dconn
	area *Area
	gen  genWords
	arms armWords
}

// armWords point at the area's arm words of this side's sleepers: the
// peer's data direction (POLLIN) and this side's space (POLLOUT).
type armWords struct {
	data, space *uint32
}

// genWords point at the area's words whose changes can make this side
// readable or writable (Gen).
type genWords struct {
	published, consumed *uint64 // bytes the peer published to us; bytes it consumed of ours
	fin, reset, closed  *uint32 // the peer's FIN and reset; the peer's reading end closed
	window              *uint32 // the peer's receive window
}

// hold returns the handle for a call, read-locked, or nil after Free
// (then nothing is held).
func (c *Conn) hold() *C.struct_sdp_dconn {
	c.mu.RLock()
	if c.c == nil {
		c.mu.RUnlock()
		return nil
	}
	return c.c
}

func (c *Conn) done() { c.mu.RUnlock() }

// errFreed answers a call on a freed handle.
var errFreed = unix.EBADF

// Open opens side (0: the area's creator, 1: its peer) of a. No ring goes
// out until SetRing names the socket.
func Open(a *Area, side int) (*Conn, error) {
	c := (*C.struct_sdp_dconn)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_sdp_dconn{}))))
	if c == nil {
		return nil, errors.New("direct: out of memory")
	}
	if r := C.sdp_dconn_open(c, unsafe.Pointer(&a.mem[0]), C.size_t(len(a.mem)), C.int(side)); r != 0 {
		C.free(unsafe.Pointer(c))
		return nil, fmt.Errorf("%w: open side %d", ErrGeometry, side)
	}
	in, out := &c.a.dir[1-side], &c.a.dir[side]
	g := genWords{
		published: (*uint64)(unsafe.Pointer(&in.tx_bytes)), consumed: (*uint64)(unsafe.Pointer(&out.rx_bytes)),
		fin: (*uint32)(unsafe.Pointer(&in.fin)), reset: (*uint32)(unsafe.Pointer(&in.reset)),
		closed: (*uint32)(unsafe.Pointer(&out.rx_closed)), window: (*uint32)(unsafe.Pointer(&out.rx_window)),
	}
	arms := armWords{data: (*uint32)(unsafe.Pointer(&in.data_armed)), space: (*uint32)(unsafe.Pointer(&out.space_armed))}
	return &Conn{c: c, area: a, gen: g, arms: arms}, nil
}

// Ptr returns the handle's address, for the interposer.
func (c *Conn) Ptr() unsafe.Pointer { return unsafe.Pointer(c.c) }

// Sleep says where a data call that must wait sleeps: FUTEX_WAIT on Word
// while it holds Val. Woke withdraws the announcement after the sleep.
type Sleep struct {
	Word *uint32
	Val  uint32
	What int32 // 0 data, 1 space
}

const waitResult = -0x10001 // SDP_D_WAIT

// result maps a C data call's answer.
func result(d C.struct_dres) (int, *Sleep, error) {
	r := d.r
	switch {
	case r >= 0:
		return int(r), nil, nil
	case r == waitResult:
		return 0, &Sleep{Word: (*uint32)(unsafe.Pointer(d.word)), Val: uint32(d.val), What: int32(d.what)}, nil
	case r == -C.long(unix.EAGAIN):
		return 0, nil, ErrWouldBlock
	default:
		return 0, nil, unix.Errno(-r)
	}
}

// Send moves up to len(b) bytes into the peer's blocks. n > 0 bytes went;
// otherwise a Sleep to wait on (block true, nothing free), ErrWouldBlock
// (block false), or an errno: EPIPE (this side shut down its writing, or
// the peer closed its reading), ECONNRESET (reset, protocol violation).
func (c *Conn) Send(b []byte, block bool) (int, *Sleep, error) {
	if len(b) == 0 {
		return 0, nil, nil
	}
	h := c.hold()
	if h == nil {
		return 0, nil, errFreed
	}
	defer c.done()
	f := C.int(0)
	if !block {
		f = C.SDP_D_NONBLOCK
	}
	d := C.go_send(h, unsafe.Pointer(&b[0]), C.size_t(len(b)), f)
	runtime.KeepAlive(b)
	return result(d)
}

// Recv copies up to len(b) arrived bytes out (peek: without consuming
// them). n > 0 bytes, or 0 with a nil error at EOF; otherwise as Send
// (ECONNRESET after a reset).
func (c *Conn) Recv(b []byte, peek, block bool) (int, *Sleep, error) {
	if len(b) == 0 {
		return 0, nil, nil
	}
	h := c.hold()
	if h == nil {
		return 0, nil, errFreed
	}
	defer c.done()
	f := C.int(0)
	if !block {
		f |= C.SDP_D_NONBLOCK
	}
	if peek {
		f |= C.SDP_D_PEEK
	}
	d := C.go_recv(h, unsafe.Pointer(&b[0]), C.size_t(len(b)), f)
	runtime.KeepAlive(b)
	return result(d)
}

// Woke withdraws the announcement of a Sleep once the sleep ended.
func (c *Conn) Woke(s *Sleep) {
	if h := c.hold(); h != nil {
		sl := C.struct_sdp_dsleep{word: (*C.uint32_t)(unsafe.Pointer(s.Word)), val: C.uint32_t(s.Val), what: C.int(s.What)}
		C.sdp_dconn_woke(h, &sl)
		c.done()
	}
}

// Fin sends the FIN (shutdown SHUT_WR) after what was sent.
func (c *Conn) Fin() {
	if h := c.hold(); h != nil {
		C.sdp_dconn_fin(h)
		c.done()
	}
}

// Reset aborts: the peer's calls fail with ECONNRESET.
func (c *Conn) Reset() {
	if h := c.hold(); h != nil {
		C.sdp_dconn_reset(h)
		c.done()
	}
}

// CloseRead says this side reads no more: the peer's sends fail with EPIPE.
func (c *Conn) CloseRead() {
	if h := c.hold(); h != nil {
		C.sdp_dconn_close_rx(h)
		c.done()
	}
}

// Poll returns the readiness now as poll(2) bits (POLLNVAL after Free).
func (c *Conn) Poll() int16 {
	h := c.hold()
	if h == nil {
		return unix.POLLNVAL
	}
	defer c.done()
	return int16(C.sdp_dconn_poll(h))
}

// Revents returns what poll(2) reports for events on a connection not
// shut down for reading, as the interposer's own poll answers it
// (sdp_dconn_revents in direct.h); POLLNVAL after Free.
func (c *Conn) Revents(events int16) int16 {
	h := c.hold()
	if h == nil {
		return unix.POLLNVAL
	}
	defer c.done()
	return int16(C.sdp_dconn_revents(h, C.int(events)))
}

// Arm asks the peer to ring once when events (POLLIN, POLLOUT) may have
// become ready: to write bell (the sleeper's bell number, 0: none) when
// it holds it, else to ring the socket. It returns the readiness after
// arming (non-zero: do not sleep).
func (c *Conn) Arm(events int16, bell int) int16 {
	h := c.hold()
	if h == nil {
		return unix.POLLNVAL
	}
	defer c.done()
	return int16(C.sdp_dconn_arm(h, C.int(events), C.uint32_t(bell)))
}

// ArmHeld reports whether the arms an Arm(events, bell) made are all
// still in place: each word holds bell's ring, or the socket's ring (two
// sleepers with different bells armed it), which a sleeper on the socket
// hears as well. An arm is spent by the peer's next ring, which can come
// late: a sender that published before the arm and had not yet looked at
// the word spends the new arm (merge_bell keeps a word that holds the
// same bell), with nothing new for the sleeper to find. false after Free.
func (c *Conn) ArmHeld(events int16, bell int) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.c == nil {
		return false
	}
	ring := uint32(1) // the word of an arm without a bell this process's peer can write (sdp_dconn_arm, merge_bell)
	if bell > 0 && bell < MaxBells && atomic.LoadUint32((*uint32)(unsafe.Pointer(&c.c.inherited))) == 0 {
		ring = 1 + uint32(bell)
	}
	held := func(w *uint32) bool {
		v := atomic.LoadUint32(w)
		return v == ring || v == 1
	}
	return (events&unix.POLLIN == 0 || held(c.arms.data)) && (events&unix.POLLOUT == 0 || held(c.arms.space))
}

// SetBells gives the handle the table of the peer process's bells this
// process holds (nil: none). The table must outlive the handle.
func (c *Conn) SetBells(b *Bells) {
	if h := c.hold(); h != nil {
		var t *C.struct_sdp_dbells
		if b != nil {
			t = b.t
		}
		h.bells = t
		c.done()
	}
}

// Bells is a table of a peer process's bells this process holds copies
// of (C memory: the interposer's data calls read it).
type Bells struct {
	t *C.struct_sdp_dbells
}

// MaxBells bounds a process's bell numbers (1..MaxBells-1).
const MaxBells = C.SDP_DBELLS

// WatcherBell is the switch watcher's bell number.
const WatcherBell = C.SDP_DBELL_WATCHER

// The last PollBells numbers are the bells of the interposer's threads
// in poll and select (by slot, from FirstPollBell); the core numbers its
// epoll sets' bells below FirstPollBell.
const (
	PollBells     = C.SDP_DBELLS_POLL
	FirstPollBell = C.SDP_DBELL_POLL
)

// NewBells returns an empty table, or nil when out of memory.
func NewBells() *Bells {
	t := (*C.struct_sdp_dbells)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_sdp_dbells{}))))
	if t == nil {
		return nil
	}
	for i := range t.fd {
		t.fd[i] = -1
	}
	return &Bells{t: t}
}

// Has reports whether the table holds bell n (0: the watcher's).
func (b *Bells) Has(n int) bool {
	return n >= 0 && n < MaxBells && atomic.LoadInt32(b.slot(n)) >= 0
}

// Mask returns the bells the table holds, bit n for bell n.
func (b *Bells) Mask() uint64 {
	var m uint64
	for n := 0; n < MaxBells; n++ {
		if b.Has(n) {
			m |= 1 << n
		}
	}
	return m
}

// Ring writes each bell of mask that the table holds (bit n: bell n, 0
// left out): the peer's sleepers in poll and epoll that armed them wake.
// The caller holds a handle that uses the table.
func (b *Bells) Ring(mask uint64) {
	one := [8]byte{1}
	for n := 1; n < MaxBells; n++ {
		if mask&(1<<n) == 0 {
			continue
		}
		if fd := atomic.LoadInt32(b.slot(n)); fd >= 0 {
			unix.Write(int(fd), one[:])
		}
	}
}

// Set stores fd as bell n and reports whether it did (n valid, not held
// yet); the table owns fd then.
func (b *Bells) Set(n, fd int) bool {
	return n >= 0 && n < MaxBells && atomic.CompareAndSwapInt32(b.slot(n), -1, int32(fd))
}

func (b *Bells) slot(n int) *int32 { return (*int32)(unsafe.Pointer(&b.t.fd[n])) }

// Close hands each bell to closeFD and frees the table: once no handle
// uses it.
func (b *Bells) Close(closeFD func(int)) {
	for i := range b.t.fd {
		if fd := int(b.t.fd[i]); fd >= 0 {
			closeFD(fd)
		}
	}
	C.free(unsafe.Pointer(b.t))
	b.t = nil
}

// Inq returns the bytes readable now; Outq the bytes sent and not yet
// consumed by the peer.
func (c *Conn) Inq() int {
	h := c.hold()
	if h == nil {
		return 0
	}
	defer c.done()
	return int(C.sdp_dconn_inq(h))
}

// setLockRound sets how long a waiter for a side lock sleeps before it
// asks whether the holder lives (preload/c/direct.h, sdp_dlock_round_ns;
// 25 rounds with the same live holder give up) and returns the old one:
// for tests that drive a hostile peer at speed.
func setLockRound(d time.Duration) time.Duration {
	return time.Duration(C.sdp_dlock_round_set(C.long(d)))
}

// Trim gives back the pages of the blocks past the first keep that a
// burst of this side's sends filled and the peer has read, once nothing
// was sent since the last Trim (the first one after a send only looks):
// call it about once a second. It returns the bytes given back
// (preload/c/direct.h, sdp_dconn_trim).
func (c *Conn) Trim(keep int) int {
	h := c.hold()
	if h == nil {
		return 0
	}
	defer c.done()
	return int(C.sdp_dconn_trim(h, C.uint32_t(keep)))
}

func (c *Conn) Outq() int {
	h := c.hold()
	if h == nil {
		return 0
	}
	defer c.done()
	return int(C.sdp_dconn_outq(h))
}

// SetNonblock, SetTimeouts and SetSlow set what the interposer's data
// calls follow: O_NONBLOCK, SO_RCVTIMEO/SO_SNDTIMEO (0: none), and which
// calls go to the core instead (SlowRecv, SlowSend; the set replaces the
// last one).
func (c *Conn) SetNonblock(on bool) {
	v := C.uint32_t(0)
	if on {
		v = 1
	}
	if h := c.hold(); h != nil {
		C.st32(&h.nonblock, v)
		c.done()
	}
}

func (c *Conn) SetTimeouts(rcv, snd time.Duration) {
	if h := c.hold(); h != nil {
		C.st64(&h.rcvtimeo, C.int64_t(rcv))
		C.st64(&h.sndtimeo, C.int64_t(snd))
		c.done()
	}
}

func (c *Conn) SetSlow(bits uint32) {
	if h := c.hold(); h != nil {
		C.st32(&h.slow, C.uint32_t(bits))
		c.done()
	}
}

// ErrSeen marks the reset as reported to the program and returns whether
// it already was (then reads see EOF and writes EPIPE).
func (c *Conn) ErrSeen() bool {
	h := c.hold()
	if h == nil {
		return true
	}
	defer c.done()
	return C.xchg32(&h.errseen, 1) != 0
}

// SetWindow sets this side's receive buffer limit (SO_RCVBUF): the peer
// keeps at most bytes unread here (0: the whole area).
func (c *Conn) SetWindow(bytes int) {
	if h := c.hold(); h != nil {
		C.sdp_dconn_set_window(h, C.uint32_t(max(0, min(bytes, 1<<31))))
		c.done()
	}
}

// Gen returns a number that changes whenever the peer does something that
// can make this side readable or writable (publishes, consumes, sends its
// FIN or a reset, closes its reading end, opens its window): an event
// loop may skip a socket that reported nothing while Gen stays the same.
// It reads the area's words without a call into C.
func (c *Conn) Gen() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.c == nil {
		return 0
	}
	g := &c.gen
	return atomic.LoadUint64(g.published) + atomic.LoadUint64(g.consumed)<<1 +
		uint64(atomic.LoadUint32(g.fin))<<40 + uint64(atomic.LoadUint32(g.reset))<<41 +
		uint64(atomic.LoadUint32(g.closed))<<42 + uint64(atomic.LoadUint32(g.window))<<43
}

// ErrSeenNow reports whether ErrSeen was called (or the interposer
// reported the reset).
func (c *Conn) ErrSeenNow() bool {
	h := c.hold()
	if h == nil {
		return true
	}
	defer c.done()
	return C.ld32(&h.errseen) != 0
}

// Stats are the handle's counters (this process).
type Stats struct {
	Sent, Received       uint64 // bytes the program moved
	SendCalls, RecvCalls uint64
	PollHits, Sleeps     uint64 // waits that polling ended, waits that slept
	Wakes, EventWakes    uint64 // futex wakes and eventfd writes made for the peer
	Violations           uint64 // protocol violations seen from the peer
	Moves                uint64 // waits that moved their thread off the peer's CPU (spreading)
	Pauses               uint64 // bulk sends that paused for starving small messages (preemption)
	SocketRings          uint64 // wakes of a peer's epoll, poll or select sleeper sent over the socket (its bell not held)
	Trimmed              uint64 // bytes of drained blocks' pages given back (Trim)
	Budget               uint32 // the current poll budget
}

// Stats reads the counters.
func (c *Conn) Stats() Stats {
	h := c.hold()
	if h == nil {
		return Stats{}
	}
	defer c.done()
	return Stats{
		Sent: uint64(C.ld64(&h.sent)), Received: uint64(C.ld64(&h.received)),
		SendCalls: uint64(C.ld64(&h.send_calls)), RecvCalls: uint64(C.ld64(&h.recv_calls)),
		PollHits: uint64(C.ld64(&h.polls_hit)), Sleeps: uint64(C.ld64(&h.sleeps)),
		Wakes: uint64(C.ld64(&h.wakes_sent)), EventWakes: uint64(C.ld64(&h.evwakes_sent)),
		Violations: uint64(C.ld64(&h.violations)), Moves: uint64(C.ld64(&h.moves)), Pauses: uint64(C.ld64(&h.pauses)),
		SocketRings: uint64(C.ld64(&h.socket_rings)),
		Trimmed:     uint64(C.ld64(&h.trimmed)),
		Budget:      uint32(h.budget),
	}
}

// SetPolling sets the poll budget's bounds (0, 0: every wait sleeps).
func (c *Conn) SetPolling(min, max uint32) {
	if h := c.hold(); h != nil {
		h.poll_min = C.uint32_t(min)
		h.poll_max = C.uint32_t(max)
		h.budget = C.uint32_t(min)
		c.done()
	}
}

// SetPreempt turns preemption on or off (preload/c/direct.c): with it,
// a blocking send of a block or more pauses at its scheduling point while
// a small message's wait of this process lost the CPU lately.
func (c *Conn) SetPreempt(on bool) {
	if h := c.hold(); h != nil {
		v := C.uint32_t(0)
		if on {
			v = 1
		}
		C.st32(&h.preempt, v)
		c.done()
	}
}

// WakeAll wakes every thread asleep on the area's words (they look
// again): after a state the sleepers' checks do not read (a switch's).
func (c *Conn) WakeAll() {
	if h := c.hold(); h != nil {
		C.sdp_dconn_wake_all(h)
		c.done()
	}
}

// Detach marks the handle closed for the interposer, wakes its sleepers
// and waits (bounded by limit) until no thread is inside a call on it;
// it reports whether none is. The handle stays usable by the core.
func (c *Conn) Detach(limit time.Duration) bool {
	h := c.hold()
	if h == nil {
		return true
	}
	defer c.done()
	C.st32(&h.closed, 1)
	C.sdp_dconn_wake_mine(h) // the interposer's sleepers read closed before they sleep
	end := time.Now().Add(limit)
	for C.ld32(&h.users) != 0 {
		if time.Now().After(end) {
			return false
		}
		time.Sleep(50 * time.Microsecond)
	}
	return true
}

// Free releases the handle and unmaps the area: after Detach, once no
// thread can use either.
func (c *Conn) Free() {
	if a := c.Release(); a != nil {
		a.Unmap()
	}
}

// Release releases the handle and returns its area, still mapped, for
// the caller to keep or unmap (nil when the handle was released before):
// after Detach, once no thread can use the handle.
func (c *Conn) Release() *Area {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == nil {
		return nil
	}
	C.free(unsafe.Pointer(c.c))
	c.c = nil
	return c.area
}

// Area returns the area the handle is on.
func (c *Conn) Area() *Area { return c.area }

// PrepareSleep announces a sleep of the caller for data (write false) or
// space (write true) and checks again: a Sleep to sleep on (then Woke),
// or nil when the wait is over already.
func (c *Conn) PrepareSleep(write bool) *Sleep {
	h := c.hold()
	if h == nil {
		return nil
	}
	defer c.done()
	var sl C.struct_sdp_dsleep
	what := C.int(0)
	if write {
		what = 1
	}
	if C.sdp_dconn_sleep_prepare(h, what, &sl) == 0 {
		return nil
	}
	return &Sleep{Word: (*uint32)(unsafe.Pointer(sl.word)), Val: uint32(sl.val), What: int32(sl.what)}
}

// TakeBack reads back, as the peer would, up to max of the bytes this
// side published that the peer has not consumed, and consumes them: for a
// connection the peer never claimed (the bytes then go another way). The
// caller guarantees that the peer does not read the area.
func (c *Conn) TakeBack(max int) []byte {
	if max <= 0 {
		return nil
	}
	buf := make([]byte, max)
	n := 0
	c.asPeer(func(peer *C.struct_sdp_dconn) {
		for n < max {
			d := C.go_recv(peer, unsafe.Pointer(&buf[n]), C.size_t(max-n), C.SDP_D_NONBLOCK)
			if d.r <= 0 {
				break
			}
			n += int(d.r)
		}
	})
	return buf[:n]
}

// PublishAsPeer publishes b, as the peer would send it, for this side to
// receive before anything the peer sends later: bytes the peer wrote
// elsewhere first (a deferred connection's writes onto the kernel socket,
// which its puller moves in before its verdict lets the peer send here).
// It returns how many went, without waiting: fewer than len(b) when the
// blocks or this side's receive window are full. The caller guarantees
// that the peer does not send meanwhile.
func (c *Conn) PublishAsPeer(b []byte) int {
	n := 0
	c.asPeer(func(peer *C.struct_sdp_dconn) {
		for n < len(b) {
			d := C.go_send(peer, unsafe.Pointer(&b[n]), C.size_t(len(b)-n), C.SDP_D_NONBLOCK)
			if d.r <= 0 {
				break
			}
			n += int(d.r)
		}
	})
	runtime.KeepAlive(b)
	return n
}

// asPeer runs f on a handle of the other side of this handle's area,
// opened for the call (its cursors are the area's; it rings nobody).
func (c *Conn) asPeer(f func(peer *C.struct_sdp_dconn)) {
	h := c.hold()
	if h == nil {
		return
	}
	defer c.done()
	peer := (*C.struct_sdp_dconn)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_sdp_dconn{}))))
	if peer == nil {
		return
	}
	defer C.free(unsafe.Pointer(peer))
	if C.sdp_dconn_open(peer, unsafe.Pointer(h.a), h.size, 1-h.side) != 0 {
		return
	}
	f(peer)
}

// MarkSwitched records in the area that this side went to kernel TCP
// (the fork switch): a fork child sharing it goes there too instead of
// resetting it when this process is gone (preload/c/forkkeep.c).
func (c *Conn) MarkSwitched() {
	if h := c.hold(); h != nil {
		C.sdp_dconn_mark_switched(h)
		c.done()
	}
}

// The switch watcher's bell (bell 0, preload/c/direct.h): a switch
// request rings the peer's watcher rather than only sending the urgent
// byte, which the watcher would have to wait for on the socket, where
// every ring of a sleeper wakes it too.

// WatchHolds marks that this process holds the peer's watcher bell; true
// when the peer's watcher asked to be rung once it does.
func (c *Conn) WatchHolds() bool {
	return c.call(func(h *C.struct_sdp_dconn) bool { return C.sdp_dconn_watch_holds(h) != 0 })
}

// WatchUrgent reports whether this side's watcher must wait for the
// urgent byte of a switch request (the peer does not hold its bell yet:
// it asks to be rung once the peer does).
func (c *Conn) WatchUrgent() bool {
	return c.call(func(h *C.struct_sdp_dconn) bool { return C.sdp_dconn_watch_urgent(h) != 0 })
}

// RingWatcher writes the peer's watcher bell; false when this process
// does not hold it.
func (c *Conn) RingWatcher() bool {
	return c.call(func(h *C.struct_sdp_dconn) bool { return C.sdp_dconn_ring_watcher(h) != 0 })
}

// RequestSwitch marks this side's switch request in the area (before its
// REQ goes out); SwitchRequested reports the peer's.
func (c *Conn) RequestSwitch() {
	c.call(func(h *C.struct_sdp_dconn) bool { C.sdp_dconn_request_switch(h); return true })
}

// FinSent reports whether this side's FIN is in the area, put there by
// this process or by a fork child sharing the side.
func (c *Conn) FinSent() bool {
	return c.call(func(h *C.struct_sdp_dconn) bool { return C.sdp_dconn_fin_sent(h) != 0 })
}

// SwitchRequested reports whether the peer marked a switch request.
func (c *Conn) SwitchRequested() bool {
	return c.call(func(h *C.struct_sdp_dconn) bool { return C.sdp_dconn_switch_requested(h) != 0 })
}

// call runs f on the held handle; false when it was freed.
func (c *Conn) call(f func(*C.struct_sdp_dconn) bool) bool {
	h := c.hold()
	if h == nil {
		return false
	}
	defer c.done()
	return f(h)
}

// PeerGone ends the connection from outside: the peer process is gone.
func (c *Conn) PeerGone() {
	if h := c.hold(); h != nil {
		C.sdp_dconn_peer_gone(h)
		c.done()
	}
}

// Arrived returns the bytes the peer has published to this side so far;
// NoSpace how many sends found no room.
func (c *Conn) Arrived() uint64 {
	h := c.hold()
	if h == nil {
		return 0
	}
	defer c.done()
	return uint64(C.sdp_dconn_arrived(h))
}

func (c *Conn) NoSpace() uint64 {
	h := c.hold()
	if h == nil {
		return 0
	}
	defer c.done()
	return uint64(C.sdp_dconn_nospace(h))
}

// SetRing names the socket the peer's armed sleeps are rung on (a zero
// byte sent on it; -1: none) and returns once no thread can still send
// on the one named before.
func (c *Conn) SetRing(fd int) {
	if h := c.hold(); h != nil {
		C.sdp_dconn_set_ring(h, C.int(fd))
		c.done()
	}
}

// WatchLater has the first sleep on the area (a blocking call's, or a
// poll or epoll arm) add this side's socket to the epoll set epfd with
// id, for the end of the TCP connection (EPOLLRDHUP, one-shot), rather
// than the caller now: a connection that never sleeps never needs it. It
// reports false when the socket was added already; the caller then arms
// it again itself.
func (c *Conn) WatchLater(epfd int, id int32) bool {
	h := c.hold()
	if h == nil {
		return false
	}
	defer c.done()
	return C.sdp_dconn_watch_later(h, C.int(epfd), C.uint64_t(uint32(id))) != 0
}

// WatchNow adds the socket now if it waits for its first sleep
// (WatchLater).
func (c *Conn) WatchNow() {
	if h := c.hold(); h != nil {
		C.sdp_dconn_watch_now(h)
		c.done()
	}
}

// WatchTake ends WatchLater's registration. It reports whether the
// socket was added (the caller removes it from the set).
func (c *Conn) WatchTake() bool {
	h := c.hold()
	if h == nil {
		return false
	}
	defer c.done()
	return C.sdp_dconn_watch_take(h) != 0
}

// Drain reads the rings that arrived on fd, this side's socket. It
// reports whether a byte that is no ring came: the start of the peer's
// switch record, kept for Pushback.
func (c *Conn) Drain(fd int) bool {
	h := c.hold()
	if h == nil {
		return false
	}
	defer c.done()
	return C.sdp_dconn_drain(h, C.int(fd)) == 1
}

// DrainDue reports whether enough sleeps were armed since the last Drain
// that the rings should be read.
func (c *Conn) DrainDue() bool {
	h := c.hold()
	if h == nil {
		return false
	}
	defer c.done()
	return C.sdp_dconn_drain_due(h) != 0
}

// Quiet gives the socket to the switch to kernel TCP: once it returns no
// ring goes out and no drain reads. It returns what drains read that was
// no ring (the start of the peer's record).
func (c *Conn) Quiet() []byte {
	h := c.hold()
	if h == nil {
		return nil
	}
	defer c.done()
	C.sdp_dconn_quiet(h)
	var buf [64]byte
	n := C.sdp_dconn_pushback(h, (*C.uint8_t)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)))
	return append([]byte(nil), buf[:n]...)
}
