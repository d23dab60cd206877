package shim

import (
	"io"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/direct"
	"github.com/sdpshim/sdpshim/core/mux"
	"github.com/sdpshim/sdpshim/core/rendezvous"
	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/core/wire"
	"github.com/sdpshim/sdpshim/shim/config"
	"github.com/sdpshim/sdpshim/shim/stats"
)

// The direct path (SDPSHIM_CHANNEL=direct): each accelerated connection
// has an area of its own (core/direct), made by the connector and passed
// in its offer (the memfd is its only file). The interposer moves the program's bytes over the area itself
// (host direct_attach); the core keeps the connection's life (setup,
// close, shutdown, peer death, fork), its readiness for poll and epoll,
// and the calls the interposer hands over, which it makes over the same C
// functions (directStream).
//
// Waking: a thread that must wait announces itself in the area and
// sleeps on a word there, which the peer's thread bumps and wakes; a poll
// or epoll sleeper arms the area and waits on its own TCP socket, and the
// peer's thread rings it once: a zero byte sent on the peer's TCP socket
// (nothing else travels there until a switch to kernel TCP). So a
// connection costs the program one fd, its socket, as on kernel TCP.

// directStream is the dataStream of a direct connection.
type directStream struct {
	p       *Process
	conn    *direct.Conn
	peerPID int        // the peer process (statistics)
	peer    *peerBells // the peer process's bells (bells.go); nil without
	side    int        // 0: this process made the area (the connector), 1: the peer did
	where   slabArea   // the area's slab and place, if it is a slab's (areapool.go)
	// noReuse: another process (a fork child that kept the connection)
	// or a thread stuck in a call may still use the handle after this
	// process lets it go, so its area is never given to another
	// connection (areapool.go).
	noReuse atomic.Bool

	blocking atomic.Bool  // SetNonblock(false): Write waits for room (closing, exit)
	wdl      atomic.Int64 // blocking Write's deadline (UnixNano), 0: none
	closed   sync.Once
	freed    atomic.Bool
	attachMu sync.Mutex
	attached []int                       // fds the interposer has the handle for; +checklocks:attachMu
	syncMu   sync.Mutex                  // syncDirect: one reads the socket's state and stores it at a time
	final    atomic.Pointer[stats.Extra] // the counts when the handle went
}

var _ dataStream = (*directStream)(nil)

// newDirectEventFD makes a protected, high-numbered eventfd (an epoll
// set's kick).
func (p *Process) newDirectEventFD() (int, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return -1, err
	}
	fd = highFD(fd)
	p.protect(fd)
	return fd, nil
}

// closeFD closes a protected fd of the shim's.
func (p *Process) closeFD(fd int) {
	if fd >= 0 {
		p.unprotect(fd)
		unix.Close(fd)
	}
}

// directSlot is the bytes a direct area gives each block for a block
// size of blockSize: the header beside the payload rather than inside it
// (one cache line more), so that a block carries blockSize bytes and a
// write of a power of two, such as 64 KiB, fills whole blocks (with the
// header inside, 64 KiB took 4 full blocks and a fifth for 64 bytes:
// iperf3 moved 51-63 Gbit/s, against 55-69 with the line added). At the
// largest block size the header stays inside.
func directSlot(blockSize int) int {
	return min(blockSize+64, direct.MaxBlockSize)
}

// offerDirect makes the connector's side: the area (side 0) and the
// files its offer carries (the area's memfd, then this process's bells
// the peer was not given yet, bells their mask).
func (p *Process) offerDirect(peer procID) (ds *directStream, files []int, bells uint64, err error) {
	peerPID := peer.pid
	a, where, fd, err := p.ownArea(peer)
	if err != nil {
		return nil, nil, 0, err
	}
	c, err := direct.Open(a, 0)
	if err != nil {
		p.areas.putOwn(p, where, a, false)
		return nil, nil, 0, err
	}
	ds = &directStream{p: p, conn: c, peerPID: peerPID, where: where}
	ds.setPolicy()
	ds.bindBells(peer) // its start, when known, tells a record of an earlier process of that pid
	if ds.peer != nil && ds.p.startKnown(ds.peer) {
		ds.holdWatcher() // before the acceptor can watch the connection
	}
	give, bells := p.bellsToGive(ds.peer, rendezvous.MaxFiles-1)
	return ds, append([]int{fd}, give...), bells, nil
}

// slotToken is the offer's description of the area's place (offerMsg.token).
func (ds *directStream) slotToken() uint64 {
	if ds.where.own == nil {
		return 0
	}
	return slotToken(ds.where.own.s, ds.where.i)
}

// sent closes the area's memfd once the offer carried it: the peer has
// its copy, and the mapping stays. A slab's memfd stays (areapool.go).
func (ds *directStream) sent() {
	if ds.where.own != nil {
		return
	}
	a := ds.conn.Area()
	ds.p.unprotect(a.FD())
	a.CloseFD()
}

// answered finishes the connector's side once the offer's answer came,
// with the acceptor's bells; the answer says which of this process's
// bells the acceptor holds, which the next offer's leave out. The caller
// keeps the answer's files.
func (ds *directStream) answered(answer rendezvous.Payload) error {
	ans, err := decodeAnswer(answer.Data)
	if err != nil {
		return err
	}
	answerFiles := answer.Files
	if len(answerFiles) != bits.OnesCount64(ans.bells) {
		return errBadOffer
	}
	if ds.peer != nil && !ds.p.startOf(ds.peer, ans.start) {
		// A record of another process that had the acceptor's pid (its
		// bells would ring nobody): this connection takes a new one.
		old := ds.peer
		ds.bindBells(procID{pid: ds.peerPID, start: ans.start})
		ds.p.unrefBells(old)
	}
	ds.p.peerHolds(ds.peer, ans.held)
	ds.p.takeBells(ds.peer, ans.bells, answerFiles)
	ds.holdWatcher()
	return nil
}

// holdWatcher tells the peer (in the area) that this process holds its
// watcher's bell, when it does, and rings it if the peer's watcher asked
// for that (it waits for the urgent byte until then: switchwatch.go).
func (ds *directStream) holdWatcher() {
	if ds.peer != nil && ds.peer.table.Has(direct.WatcherBell) && ds.conn.WatchHolds() {
		ds.conn.RingWatcher()
	}
}

// bindBells gives ds the record of its peer process id (its bells).
func (ds *directStream) bindBells(id procID) {
	ds.peer = ds.p.peerBellsFor(id)
	if ds.peer != nil {
		ds.conn.SetBells(ds.peer.table)
	} else {
		ds.conn.SetBells(nil)
	}
}

// acceptDirect makes the acceptor's side from an offer o's files (the
// area's memfd and the connector's bells, which stay the caller's) and
// returns it with its answer and the answer's files (this process's
// bells the connector was not given yet).
func (p *Process) acceptDirect(o offerMsg, files []int) (*directStream, answerMsg, []int, error) {
	if len(files) != 1+bits.OnesCount64(o.bells) {
		return nil, answerMsg{}, nil, errBadOffer
	}
	a, where, err := p.peerArea(o.from, files[0], o.token)
	if err != nil {
		return nil, answerMsg{}, nil, err
	}
	c, err := direct.Open(a, 1)
	if err != nil {
		p.areas.putPeer(p, where, a, false)
		return nil, answerMsg{}, nil, err
	}
	ds := &directStream{p: p, conn: c, peerPID: o.from.pid, side: 1, where: where}
	ds.setPolicy()
	ds.bindBells(o.from)
	p.takeBells(ds.peer, o.bells, files[1:])
	ds.holdWatcher()
	p.peerHolds(ds.peer, o.held) // the connector's word, not what this process noted giving
	give, bells := p.bellsToGive(ds.peer, rendezvous.MaxFiles)
	p.gaveBells(ds.peer, bells) // if the answer is lost, the next offer's held mask says so
	return ds, answerMsg{id: 1, start: p.self.start, bells: bells, held: heldBells(ds.peer)}, give, nil
}

// setPolicy gives the handle the poll budget SDPSHIM_POLL asks for, and
// preemption as SDPSHIM_PREEMPT says: small messages before bulk sends,
// and turns for bulk sends among the user's processes (tenants.go).
func (ds *directStream) setPolicy() {
	c := &ds.p.cfg
	ds.conn.SetPreempt(c.Preempt)
	if c.Preempt {
		ds.conn.SetBoard(ds.p.board())
	}
	switch c.Poll {
	case config.PollEvent:
		ds.conn.SetPolling(0, 0)
	case config.PollBusy:
		ds.conn.SetPolling(1<<30, 1<<30)
	case config.PollHybrid:
		ds.conn.SetPolling(uint32(c.PollSpin), uint32(c.PollSpin))
	default:
		ds.conn.SetPolling(uint32(c.PollMin), uint32(c.PollMax))
	}
}

// abandon releases a side that never carried a connection.
func (ds *directStream) abandon() {
	ds.conn.Reset()
	ds.release()
}

// release frees the handle and the area once no thread can use them.
func (ds *directStream) release() {
	ds.attachMu.Lock()
	if ds.freed.Swap(true) {
		ds.attachMu.Unlock()
		return
	}
	ds.attachMu.Unlock()
	ds.conn.SetRing(-1) // after the close's FIN rang: its fd may close now
	ds.noteViolations()
	ds.detachAll()
	ds.conn.Detach(0) // from now on the interposer's calls go to the core; sleepers wake
	// A thread that took the handle from the table just before detachAll
	// has raised its user count well within the grace; the handle is
	// freed once every user has left (a thread still inside then is
	// waited for on a goroutine of its own, not on the reaper's).
	ds.p.reap.after(func() {
		if ds.conn.Detach(0) {
			ds.free()
			return
		}
		go func() {
			if !ds.conn.Detach(time.Minute) {
				ds.noReuse.Store(true) // a thread is still inside
			}
			ds.free()
		}()
	})
}

// free keeps the final counts, then frees the handle and gives the area
// back (kept for a later connection, or unmapped: areapool.go): once no
// thread is inside the handle.
func (ds *directStream) free() {
	x := ds.counts()
	ds.final.Store(&x)
	if a := ds.conn.Release(); a != nil {
		if ds.side == 1 {
			ds.p.areas.putPeer(ds.p, ds.where, a, ds.noReuse.Load())
		} else {
			ds.p.areas.putOwn(ds.p, ds.where, a, ds.noReuse.Load())
		}
	}
	if ds.peer != nil {
		ds.p.unrefBells(ds.peer)
	}
}

// directGrace is how long a released handle stays mapped after it left
// the interposer's table.
const directGrace = 50 * time.Millisecond

// attach hands fd's data calls to the interposer.
func (ds *directStream) attach(fd int) {
	h := ds.p.directHost()
	if h == nil {
		return
	}
	ds.attachMu.Lock()
	defer ds.attachMu.Unlock()
	if ds.freed.Load() {
		return
	}
	h.DirectAttach(fd, ds.conn.Ptr())
	ds.attached = append(ds.attached, fd)
}

// detach takes them back.
func (ds *directStream) detach(fd int) {
	h := ds.p.directHost()
	if h == nil {
		return
	}
	ds.attachMu.Lock()
	defer ds.attachMu.Unlock()
	for i, f := range ds.attached {
		if f == fd {
			h.DirectAttach(fd, nil)
			ds.attached = append(ds.attached[:i], ds.attached[i+1:]...)
			return
		}
	}
}

// detachAll takes every fd back (the handle goes: closed, or switched to
// kernel TCP with its fds still open).
func (ds *directStream) detachAll() {
	h := ds.p.directHost()
	if h == nil {
		return
	}
	ds.attachMu.Lock()
	defer ds.attachMu.Unlock()
	for _, fd := range ds.attached {
		h.DirectAttach(fd, nil)
	}
	ds.attached = nil
}

// directHost returns the host as a directHost, or nil when its
// interposer makes no data calls itself (tests, an older interposer).
func (p *Process) directHost() directHost {
	h, _ := p.host.(directHost)
	return h
}

// directHost is a Host whose interposer makes the data calls of direct
// connections itself (preload/c/directio.c).
type directHost interface {
	// DirectAttach makes fd's data calls go over the handle conn (nil:
	// back to the core).
	DirectAttach(fd int, conn unsafe.Pointer)
}

// counts returns what the interposer moved on the handle (statistics).
func (ds *directStream) counts() stats.Extra {
	if f := ds.final.Load(); f != nil {
		return *f
	}
	x := ds.conn.Stats()
	return stats.Extra{BytesSent: x.Sent, MessagesSent: x.SendCalls, BytesReceived: x.Received, MessagesReceived: x.RecvCalls,
		Moves: x.Moves, Pauses: x.Pauses, SocketRings: x.SocketRings}
}

// waitStats are the waits made on the handle, both directions, by the
// interposer and the core: those its poll ended, and those that spent
// the budget and slept; the budget is the handle's now (0: every wait
// sleeps).
func (ds *directStream) waitStats() wait.WaiterStats {
	x := ds.conn.Stats()
	return wait.WaiterStats{Waits: x.PollHits + x.Sleeps, PollHits: x.PollHits, Sleeps: x.Sleeps, Budget: int64(x.Budget)}
}

// ---- dataStream ----

func (ds *directStream) Read(p []byte) (int, error) { return ds.read(p, false) }
func (ds *directStream) Peek(p []byte) (int, error) { return ds.read(p, true) }

func (ds *directStream) read(p []byte, peek bool) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, err := ds.conn.Recv(p, peek, false)
	switch {
	case err == direct.ErrWouldBlock:
		return 0, wire.ErrWouldBlock
	case err != nil:
		return 0, err
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (ds *directStream) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, sl, err := ds.conn.Send(p[done:], ds.blocking.Load())
		done += n
		switch {
		case n > 0 && !ds.blocking.Load():
			return done, nil
		case err == direct.ErrWouldBlock:
			if done > 0 {
				return done, nil
			}
			return 0, wire.ErrWouldBlock
		case err != nil:
			if done > 0 {
				return done, nil
			}
			return 0, err
		case sl != nil:
			if !ds.sleep(sl, ds.wdl.Load()) {
				return done, wire.ErrWouldBlock
			}
		}
	}
	return done, nil
}

// sleep waits on sl (a core goroutine's own wait: closing, exit) until
// woken or deadline (UnixNano, 0: none); false at the deadline.
func (ds *directStream) sleep(sl *direct.Sleep, deadline int64) bool {
	ts := unix.NsecToTimespec(int64(100 * time.Millisecond))
	if deadline > 0 {
		left := deadline - time.Now().UnixNano()
		if left <= 0 {
			ds.conn.Woke(sl)
			return false
		}
		ts = unix.NsecToTimespec(min(left, int64(100*time.Millisecond)))
	}
	ds.conn.WatchNow() // a peer gone meanwhile ends it (switchwatch.go)
	const futexWait = 0
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(sl.Word)), futexWait, uintptr(sl.Val), uintptr(unsafe.Pointer(&ts)), 0, 0)
	ds.conn.Woke(sl)
	return true
}

func (ds *directStream) CloseWrite() error {
	ds.conn.Fin()
	return nil
}

// Close ends the connection as the kernel's close does: a FIN after what
// was sent, or a reset when bytes arrived that the program never read;
// the peer's later sends fail. The area is freed once no call is inside.
func (ds *directStream) Close() error {
	ds.closed.Do(func() {
		if ds.conn.Inq() > 0 {
			ds.conn.Reset()
		} else {
			ds.conn.Fin()
		}
		ds.conn.CloseRead()
		ds.release()
	})
	return nil
}

func (ds *directStream) Abort() error {
	ds.conn.Reset()
	return ds.Close()
}

const (
	readyIn  = unix.POLLIN | unix.POLLERR | unix.POLLHUP
	readyOut = unix.POLLOUT | unix.POLLERR | unix.POLLHUP
)

func (ds *directStream) ReadReady() bool     { return ds.conn.Poll()&readyIn != 0 }
func (ds *directStream) WriteReady() bool    { return ds.conn.Poll()&readyOut != 0 }
func (ds *directStream) ReadReadyNow() bool  { return ds.ReadReady() }
func (ds *directStream) WriteReadyNow() bool { return ds.WriteReady() }
func (ds *directStream) Buffered() int       { return ds.conn.Inq() }

// Unsent is 0 and Drained true: a direct stream holds nothing in this
// process; what a send returned for is in the peer's memory.
func (ds *directStream) Unsent() int   { return 0 }
func (ds *directStream) Drained() bool { return true }

// Attend and Unattend do nothing: no goroutine moves a direct stream.
func (ds *directStream) Attend()   {}
func (ds *directStream) Unattend() {}

// SetNotify does nothing: the peer's thread wakes this side's sleepers
// through the area (and the socket or the set's bell), not through the core.
func (ds *directStream) SetNotify(func()) {}

// SetNonblock(false) makes the core's own Writes wait for room (the
// interposer follows the socket's O_NONBLOCK, Socket.syncDirect).
func (ds *directStream) SetNonblock(nonblock bool) { ds.blocking.Store(!nonblock) }

func (ds *directStream) SetWriteDeadline(t time.Time) error {
	if t.IsZero() {
		ds.wdl.Store(0)
	} else {
		ds.wdl.Store(t.UnixNano())
	}
	return nil
}

// SetSendBuf does nothing: what a send returned for is in the peer's
// memory already. SetRcvBuf bounds what the peer may keep unread here
// (the area's size when larger, or 0).
func (ds *directStream) SetSendBuf(int)  {}
func (ds *directStream) SetRcvBuf(n int) { ds.conn.SetWindow(n) }

func (ds *directStream) ID() uint32                { return 1 }
func (ds *directStream) Channel() *mux.Channel     { return nil }
func (ds *directStream) Flow() wire.FlowController { return nil }

// ---- the socket around it ----

// syncDirect gives the interposer the socket's settings that its data
// calls follow: O_NONBLOCK, the timeouts, and which calls stay the
// core's (after shutdown(SHUT_RD), while early bytes wait, once a switch
// to kernel TCP began).
func (s *Socket) syncDirect() {
	ds := s.direct()
	if ds == nil {
		return
	}
	// Serialised: a call that read the state before another changed it
	// must not store its settings after the changer's call stored newer
	// ones (a lost slow bit lets the interposer write ahead of early
	// bytes, or into a connection being switched).
	ds.syncMu.Lock()
	defer ds.syncMu.Unlock()
	ds.conn.SetNonblock(s.nonblock.Load())
	ds.conn.SetTimeouts(time.Duration(s.rcvTimeo.Load()), time.Duration(s.sndTimeo.Load()))
	var slow uint32
	if s.shutRD.Load() {
		slow |= direct.SlowRecv
	}
	if s.earlyN.Load() > 0 {
		slow |= direct.SlowSend
	}
	if s.sw.Load() != swNone { // switching to kernel TCP (forkswitch.go)
		slow |= direct.SlowRecv | direct.SlowSend
	}
	ds.conn.SetSlow(slow)
}

// blockDirect is block for a direct socket: after the policy's polling it
// announces the sleep in the area (ds.PrepareSleep) and fills w for a
// futex sleep on the area's word, which the peer's thread wakes; the
// thread's next call withdraws the announcement (resume).
func (s *Socket) blockDirect(ds *directStream, w *Wait, write bool, deadline int64, done uint64) bool {
	sl := ds.conn.PrepareSleep(write)
	if sl == nil {
		return true
	}
	timeout := int64(-1)
	if deadline > 0 {
		timeout = max(deadline-nowNS(), 0)
	}
	s.sleepDirect(write, deadline, sl)
	*w = Wait{Kind: WaitFutex, Word: sl.Word, Val: sl.Val, Timeout: timeout, Done: done}
	return false
}

// armDirect arms the area for what a poll or epoll sleep waits for and
// returns the readiness after arming (non-zero: report, do not sleep).
// The peer writes bell (the sleeper's, bells.go; 0: none) when it holds
// it, else it rings fd, the socket, once; the rings are read here when
// enough have come (edge-triggered sleeps do not need them read), and a
// drain that meets the start of a switch record starts the switch.
func (s *Socket) armDirect(ds *directStream, fd int, events int16, bell int) int16 {
	if ds.conn.DrainDue() && ds.conn.Drain(fd) {
		s.switchRequested()
	}
	return ds.conn.Arm(armEvents(events), bell)
}

// armEvents is what an arm for the poll events asks of the area: POLLIN
// (data) and POLLOUT (room); direct.Conn.ArmHeld asks the same.
func armEvents(events int16) int16 {
	var want int16
	if events&pollIn != 0 {
		want |= unix.POLLIN
	}
	if events&(pollOut|pollWRBAND) != 0 {
		want |= unix.POLLOUT
	}
	return want
}

// peerGone ends the connection from outside (its TCP connection ended:
// the peer process exited or was killed).
func (ds *directStream) peerGone() { ds.conn.PeerGone() }

// adoptDirectLocked hands the socket's fds to the interposer and names
// the one the peer's sleeps are rung on.
//
// +checklocks:s.mu
func (s *Socket) adoptDirectLocked(ds *directStream) {
	// The slow bits first: a program thread may enter the interposer's
	// fast path the moment an fd is attached, and early bytes still
	// waiting must go before its write.
	s.syncDirect()
	s.ringLocked()
	for _, fd := range s.fds {
		ds.attach(fd)
	}
}

// ringLocked names the fd that rings of the peer's sleeps go out on: the
// socket's first fd while it is a direct connection not switching to
// kernel TCP (whose records then travel on the socket), or one whose
// offer's area takes early bytes while the verdict is pending, else none.
// Called whenever the fds change: a number the program closed is never
// rung. A connecting socket rings only a sleeper the acceptor armed,
// which it does once it claimed the connection, so a ring's zero byte
// never lands in a connection that ends up plain.
//
// +checklocks:s.mu
func (s *Socket) ringLocked() {
	ds, st := s.direct(), s.getState()
	if ds == nil && st == sockConnecting && s.pend != nil {
		ds = s.pend.direct
	}
	if ds == nil {
		return
	}
	fd := -1
	if len(s.fds) > 0 && s.sw.Load() == swNone && (st == sockAccelerated || st == sockConnecting) {
		fd = s.fds[0]
		ds.conn.SetTCPOpts(s.tcpOptsLocked()) // its first ring on the socket holds them (tcpopts.go)
	}
	ds.conn.SetRing(fd)
}
