package shim

import (
	"encoding/binary"
	"errors"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/rendezvous"
	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/core/wire"
)

// Switching an accelerated connection to kernel TCP, without losing or
// duplicating a byte, while both processes run their core.
//
// Why: a fork child of a process running the core cannot enter the core
// (the old Go runtime hangs there), yet it shares the parent's sockets. A
// socket the child inherits must therefore be plain kernel TCP before the
// child exists, in both processes: then the kernel counts its holders
// (the parent closing its copy after fork ends nothing), whoever reads
// first gets the bytes, exec keeps it working. So fork_prepare (in the
// parent, where the runtime runs) switches every accelerated connection
// the child inherits, with the peer's help; the peer's core switches its
// end. The TCP connection beside the stream has carried nothing so far;
// the switch uses it for its few records, then for the payload.
//
// The protocol, the same for both ends except who starts (the forker,
// or both when both fork at once); "write"/"read" are on the TCP socket:
//
//  1. write REQ (8 bytes, then one urgent byte: once per connection; a
//     direct connection's request is marked in the area first and rings
//     the peer's watcher bell after), read the peer's REQ. A responder's
//     watcher (switchwatch.go) is rung, or sees the urgent byte arrive
//     (EPOLLPRI), marks the socket busy (the program's calls wait), then
//     writes its own REQ. The rings of a direct connection (zero bytes
//     the peer sends on the socket, direct.go) before a REQ are skipped;
//     none comes after it (direct.Conn.Quiet).
//  2. CloseWrite the stream: everything this end sent before the switch
//     is on the stream, ahead of its FIN; everything after goes on TCP.
//  3. A forker drains the stream to the peer's FIN: P, the bytes the peer
//     sent that its program has not read. Its child could not read them
//     (they are on this runtime's heap), so it writes RET(P) and the peer
//     replays P over TCP ahead of anything it writes later. A responder
//     keeps its unread bytes (its program reads them before the kernel's:
//     the "tail") and writes an empty RET.
//  4. Read the peer's RET(Q) and write Q to TCP (the replay), then the
//     program's writes go to the kernel. A forker returns from
//     fork_prepare only when all is done: its connection is plain TCP.
//
// Which end is a forker is decided at step 3 (Socket.swFork): fork_prepare
// marks every socket the child inherits before any REQ goes out, so a run
// this process started as a responder (the peer forked at the same time)
// returns its unread bytes too. A responder that kept a tail and then
// forks before its program read it leaves those bytes to the parent (a
// warning): the one case where the child cannot see bytes sent to it.
//
// Reads by the program: a forker's socket is plain once switched; a
// responder's program reads its tail, then (at the stream's EOF) the
// kernel socket. Writes: after the replay, kernel. Deadlines bound every
// wait of a forker (fork never hangs): a peer that does not answer in
// time, or vanishes mid-switch, makes the connection fail (shut down, a
// warning logged): an error, never wrong bytes.

// Switch states (Socket.sw).
const (
	swNone   uint32 = iota // accelerated as usual
	swBusy                 // the protocol runs: data calls wait
	swReplay               // reads: tail, then kernel; writes wait for the replay
	swDone                 // reads: tail, then kernel; writes: kernel
)

var (
	switchREQ = [8]byte{'S', 'D', 'P', 's', 'w', 'R', 'E', 'Q'}
	switchRET = [8]byte{'S', 'D', 'P', 's', 'w', 'R', 'E', 'T'}
)

// switchDeadline bounds a forker's whole switch of one connection.
const switchDeadline = 3 * time.Second

// switchMaxReturn bounds a RET's length: more than any channel holds.
const switchMaxReturn = 1 << 30

var errSwitchTimeout = errors.New("switch to kernel TCP: peer did not answer in time")

// switchForFork switches every accelerated connection a child of this
// fork (or spawn) inherits to kernel TCP, in parallel, except those kept
// (forkkeep.go), and returns when each is done or has given up.
func (p *Process) switchForFork(kind int, kept map[*Socket]struct{}) {
	socks := p.liveSockets()
	k := 0
	for _, s := range socks {
		if _, keep := kept[s]; !keep && (kind == ForkFork || s.inheritable()) {
			// Before any REQ goes out: a run this process starts as a
			// responder (the peer forks too) answers as a forker.
			s.swFork.Store(true)
			socks[k] = s
			k++
		}
	}
	switchAsForkers(socks[:k])
}

// switchAsForkers switches socks to kernel TCP, each as a forker, in
// parallel, and returns when each is done or has given up.
func switchAsForkers(socks []*Socket) {
	var wg sync.WaitGroup
	for _, s := range socks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.switchAsForker()
		}()
	}
	wg.Wait()
}

// liveSockets returns the accelerated sockets of the process.
func (p *Process) liveSockets() []*Socket {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Collect(maps.Keys(p.live))
}

// Pass is the pass hook: fd is in an SCM_RIGHTS message about to be sent.
// The receiving process cannot read the stream (it lives in this process's
// memory), so an accelerated connection switches to kernel TCP first, as
// for a fork child: this process acts as the forker. A deferred connection
// not claimed yet stays so (its receiver claims it at first use).
func (p *Process) Pass(fd int) {
	s := p.fds.socket(fd)
	if s == nil || s.getState() != sockAccelerated {
		return
	}
	p.count("pass.switch")
	s.swFork.Store(true)
	s.switchAsForker()
}

// inheritable reports whether an fd of s lacks FD_CLOEXEC (a spawned
// child gets it).
func (s *Socket) inheritable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, fd := range s.fds {
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && fl&unix.FD_CLOEXEC == 0 {
			return true
		}
	}
	return false
}

// switchFD returns a private duplicate of one of s's fds for the switch
// (the program may close its fds meanwhile), or -1.
func (s *Socket) switchFD() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.fds) == 0 || s.getState() != sockAccelerated {
		return -1
	}
	d, err := dupHigh(s.fds[0])
	if err != nil {
		return -1
	}
	return d
}

// switchBegin takes what a run needs once it owns the switch (swBusy):
// the stream and a private fd, and wakes the program's waiting calls
// (they wait for the switch now); false, and swNone again, when the
// socket is no longer accelerated.
func (s *Socket) switchBegin() (dataStream, int, bool) {
	st := s.stream.Load()
	fd := s.switchFD()
	if fd < 0 || st == nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		s.sw.Store(swNone)
		return nil, -1, false
	}
	if ds, ok := st.(*directStream); ok {
		// The program's calls are the core's now (they wait for the
		// switch, then go to the kernel); those asleep in the interposer
		// look again. No ring goes out from now on and no drain reads
		// the socket: its bytes are the switch's (what a drain read of
		// the peer's REQ is kept).
		s.syncDirect()
		ds.conn.WakeAll()
		s.swPre = ds.conn.Quiet()
	}
	s.wake.wakeEverything()
	return st, fd, true
}

// noDelay turns Nagle's algorithm off on fd for the switch's records and
// returns what puts the program's setting back. Each end writes its REQ,
// then its RET before the other's RET arrives: Nagle held the second
// small write for the ACK of the first, which the peer delays (40 ms on
// Linux), and a fork child's first use of a kept connection took 40 ms
// instead of 1 (tcpReadFull acknowledges what it read at once, for the
// program's first small write after the switch).
func noDelay(fd int) func() {
	old, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY)
	if err != nil || old != 0 {
		return func() {}
	}
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	return func() { unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 0) }
}

// sendREQ writes this end's REQ, once per connection: the record, then
// one urgent byte (MSG_OOB), which the peer's watcher waits for unless
// it is a direct connection's whose peer holds the watcher's bell: the
// request is marked in the area first, and the bell rung after.
func (s *Socket) sendREQ(fd int, deadline time.Time) error {
	if s.reqSent.Swap(true) {
		return nil
	}
	ds := s.direct()
	if ds != nil {
		ds.conn.RequestSwitch()
	}
	if err := tcpWriteAll(fd, switchREQ[:], deadline); err != nil {
		return err
	}
	for {
		_, err := unix.SendmsgN(fd, []byte{'!'}, nil, nil, unix.MSG_OOB|unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
		switch err {
		case nil:
			if ds != nil {
				ds.conn.RingWatcher()
			}
			return nil
		case unix.EINTR:
		case unix.EAGAIN:
			if err := tcpWait(fd, unix.POLLOUT, deadline); err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// readREQ reads the peer's REQ: what a drain read of it first (swPre),
// after the rings the peer sent before it (zero bytes), which no record
// starts with.
func (s *Socket) readREQ(fd int, deadline time.Time) error {
	pre := s.swPre
	s.swPre = nil
	for len(pre) > 0 && pre[0] == 0 {
		pre = pre[1:]
	}
	var req [8]byte
	n := copy(req[:], pre)
	if n == 0 {
		if err := skipRings(fd, deadline); err != nil {
			return err
		}
	}
	if err := tcpReadFull(fd, req[n:], deadline); err != nil {
		return err
	}
	if req != switchREQ {
		return errBadSwitch
	}
	return nil
}

// skipRings reads the zero bytes at the front of fd's stream, up to the
// first byte that is not one (left unread).
func skipRings(fd int, deadline time.Time) error {
	var buf [512]byte
	for {
		n, err := tcpRecv(fd, buf[:], unix.MSG_PEEK, deadline)
		if err != nil {
			return err
		}
		z := 0
		for z < n && buf[z] == 0 {
			z++
		}
		if z == 0 {
			return nil
		}
		if _, _, err := unix.Recvfrom(fd, buf[:z], unix.MSG_DONTWAIT); err != nil {
			return err
		}
		if z < n {
			return nil
		}
	}
}

// switchAsForker runs the protocol for a process about to fork.
func (s *Socket) switchAsForker() {
	deadline := time.Now().Add(switchDeadline)
	log := s.p.log.WithField("pid", s.p.self.pid)
	s.swFork.Store(true) // a responder run that has not answered yet answers as a forker
	for !s.sw.CompareAndSwap(swNone, swBusy) {
		// A responder run is going on (the peer forked too): it finishes
		// the switch, as a forker unless it had answered already.
		if sw := s.sw.Load(); sw >= swReplay || s.getState() != sockAccelerated || time.Now().After(deadline.Add(switchDeadline)) {
			if s.getState() == sockAccelerated {
				log.Warn("fork: a connection its peer switched to kernel TCP still holds bytes its program has not read; the child cannot read them")
			}
			// The other run sets the state, then the fds' (under s.mu):
			// the fork goes on once both are done.
			s.mu.Lock()
			s.mu.Unlock() //nolint:staticcheck // a barrier
			return
		}
		time.Sleep(200 * time.Microsecond)
	}
	st, fd, ok := s.switchBegin()
	if !ok {
		return
	}
	defer unix.Close(fd)
	defer noDelay(fd)()
	if err := s.sendREQ(fd, deadline); err != nil {
		s.switchFailed(fd, err)
		return
	}
	if err := s.readREQ(fd, deadline); err != nil {
		// A peer that does not answer in time (stopped, hung) fails the
		// connection: kept accelerated in the parent, its switch records
		// could later reach the child, which shares the kernel socket.
		s.switchFailed(fd, err)
		return
	}
	s.noteFinSent(st)
	st.CloseWrite()
	s.switchComplete(fd, st, deadline)
}

// switchComplete is the end of the protocol, once the REQs crossed and
// this end's stream is closed: as a forker (a fork waits: swFork) or as a
// responder.
func (s *Socket) switchComplete(fd int, st dataStream, deadline time.Time) {
	var tail []byte // nil: a responder keeps its unread bytes
	forker := s.swFork.Load()
	if forker {
		var err error
		if tail, err = drainStream(st, deadline); err != nil {
			s.switchFailed(fd, err)
			return
		}
	}
	if err := s.switchReturn(fd, st, tail, deadline); err != nil {
		s.switchFailed(fd, err)
		return
	}
	if !forker {
		s.switchTailCheck()
		return
	}
	for !st.Drained() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
	s.switchFinish()
	s.p.log.WithField("returned", len(tail)).Debug("fork: connection switched to kernel TCP")
}

// switchRequested starts the responder when a drain of the socket read
// the start of the peer's REQ (the watcher may see its urgent byte too:
// one of the two runs).
func (s *Socket) switchRequested() {
	if s.sw.Load() == swNone {
		go s.switchAsResponder()
	}
}

// switchAsResponder runs the protocol after the peer's REQ arrived
// (started by the watcher).
func (s *Socket) switchAsResponder() {
	if !s.sw.CompareAndSwap(swNone, swBusy) {
		return
	}
	st, fd, ok := s.switchBegin()
	if !ok {
		return
	}
	defer unix.Close(fd)
	defer noDelay(fd)()
	// The peer waits for our REQ, then drains our stream: no deadline of
	// ours is needed for its answers but a generous one (a stopped peer).
	deadline := time.Now().Add(10 * switchDeadline)
	if err := s.readREQ(fd, deadline); err != nil {
		s.switchFailed(fd, errBadSwitch)
		return
	}
	s.noteFinSent(st)
	st.CloseWrite()
	if err := s.sendREQ(fd, deadline); err != nil {
		s.switchFailed(fd, err)
		return
	}
	s.switchComplete(fd, st, deadline)
}

// switchReturn writes RET(tail) (in the background: the peer may be
// writing a large one to us at the same time), reads the peer's RET and
// replays it. A forker replays before returning; a responder lets its
// program read meanwhile (swReplay) and replays without deadline, since
// the peer's child reads it whenever it runs.
func (s *Socket) switchReturn(fd int, st dataStream, tail []byte, deadline time.Time) error {
	out := make([]byte, 16, 16+len(tail))
	copy(out, switchRET[:])
	binary.LittleEndian.PutUint64(out[8:], uint64(len(tail)))
	out = append(out, tail...)
	wrote := make(chan error, 1)
	go func() { wrote <- tcpWriteAll(fd, out, deadline) }()
	var hdr [16]byte
	err := tcpReadFull(fd, hdr[:], deadline)
	var back []byte
	if err == nil {
		n := binary.LittleEndian.Uint64(hdr[8:])
		if [8]byte(hdr[:8]) != switchRET || n > switchMaxReturn {
			err = errBadSwitch
		} else {
			back = make([]byte, n)
			err = tcpReadFull(fd, back, deadline)
		}
	}
	if werr := <-wrote; err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	forker := tail != nil // drainStream's result is never nil
	if !forker {
		// Logged before the program can see the switch (it may read its
		// tail, close and exit while the replay runs).
		s.p.log.Debug("connection switched to kernel TCP by its peer")
		s.sw.Store(swReplay)
		s.wake.wakeEverything()
		deadline = time.Time{}
	}
	if err := s.replay(fd, back, deadline); err != nil {
		return err
	}
	if !forker {
		s.sw.Store(swDone) // before switchShutWR: a shutdown meanwhile sees one or the other
		s.wake.wakeEverything()
	}
	s.switchShutWR(fd)
	return nil
}

// replay writes b to TCP; without deadline it gives up only when the
// socket closes or the connection fails.
func (s *Socket) replay(fd int, b []byte, deadline time.Time) error {
	for len(b) > 0 {
		d := deadline
		if d.IsZero() {
			d = time.Now().Add(200 * time.Millisecond)
		}
		n, err := tcpWriteSome(fd, b, d)
		b = b[n:]
		switch {
		case err == nil:
		case errors.Is(err, errSwitchTimeout) && deadline.IsZero() && s.getState() == sockAccelerated:
		default:
			return err
		}
	}
	return nil
}

// switchTailCheck finishes a switched responder whose tail is empty now
// (the peer's FIN read): its fds become plain.
func (s *Socket) switchTailCheck() {
	st := s.stream.Load()
	if st == nil || s.sw.Load() != swDone {
		return
	}
	var one [1]byte
	if n, err := st.Peek(one[:]); n == 0 && !errors.Is(err, wire.ErrWouldBlock) {
		s.switchFinish()
	}
}

// switchFinish makes a switched socket plain kernel TCP: the stream is
// closed, every fd UNMANAGED, the connection counted as a fork fallback.
func (s *Socket) switchFinish() {
	p := s.p
	s.mu.Lock()
	if s.getState() != sockAccelerated {
		s.mu.Unlock()
		return
	}
	st := s.stream.Load()
	fd := -1
	if len(s.fds) > 0 {
		fd = s.fds[0]
	}
	s.wake.wakeEverything()
	// Counted before the fds go UNMANAGED: whoever sees them plain sees
	// the count too.
	p.fallback(rendezvous.ReasonForkDecline, fd, logrus.Fields{"switched": true}, nil)
	s.fallBackLocked()
	s.mu.Unlock()
	if fd >= 0 {
		s.switchShutWR(fd) // one the program asked for during the switch
	}
	p.unwatchSwitch(s, fd)
	p.tids.forget(s)
	s.dropAttendance()
	if ds, ok := st.(*directStream); ok {
		ds.conn.MarkSwitched() // a fork child sharing it goes to the kernel socket too
	}
	st.Close()
	s.closeStats()
	st.SetNotify(nil)
	p.noteDraining(st)
	p.mu.Lock()
	delete(p.live, s)
	p.forkWorkLocked()
	p.mu.Unlock()
}

// switchFailed ends a connection whose switch broke half-way (the peer
// died or spoke nonsense): shut down, so that both ends see an error
// rather than wrong bytes.
func (s *Socket) switchFailed(fd int, err error) {
	s.p.log.WithError(err).Warn("switch to kernel TCP failed; the connection is shut down")
	unix.Shutdown(fd, unix.SHUT_RDWR)
	if st := s.stream.Load(); st != nil {
		st.Close()
	}
	s.sw.Store(swDone)
	s.switchFinish()
}

var errBadSwitch = errors.New("switch to kernel TCP: unexpected record from the peer")

// drainStream reads st until the peer's FIN (or deadline).
func drainStream(st dataStream, deadline time.Time) ([]byte, error) {
	out := []byte{}
	buf := make([]byte, 64<<10)
	pause := 20 * time.Microsecond
	for {
		n, err := st.Read(buf)
		out = append(out, buf[:n]...)
		switch {
		case n > 0:
			pause = 20 * time.Microsecond
		case errors.Is(err, io.EOF):
			return out, nil
		case err != nil && !errors.Is(err, wire.ErrWouldBlock):
			return out, err
		case time.Now().After(deadline):
			return out, errSwitchTimeout
		default:
			time.Sleep(pause)
			pause = min(2*pause, time.Millisecond)
		}
	}
}

// ---- the program's calls on a switching socket ---------------------------

// switchWait is a data call's answer while the switch is busy (or, for
// writes, replaying): -EAGAIN when nonblocking, else a sleep on the wake
// word that each transition bumps.
func (s *Socket) switchWait(w *Wait, nonblock bool, until uint32) int64 {
	gen := s.wake.gen()
	if s.sw.Load() >= until {
		gen++ // moved on already: the sleep returns at once, the hook runs again
	} else if nonblock || s.nonblock.Load() {
		return negErrno(unix.EAGAIN)
	}
	s.wake.expose()
	*w = Wait{Kind: WaitFutex, Word: s.wake.word, Val: gen, Timeout: -1}
	return WaitResult
}

// switchSend is send's answer on a switching socket.
func (s *Socket) switchSend(flags int, w *Wait) int64 {
	if s.sw.Load() == swDone {
		return Pass
	}
	return s.switchWait(w, flags&unix.MSG_DONTWAIT != 0, swDone)
}

// switchEOF is recv's answer when the stream of a switching socket says
// EOF: the rest comes from the kernel socket.
func (s *Socket) switchEOF(flags int, w *Wait) int64 {
	if s.sw.Load() == swBusy {
		return s.switchWait(w, flags&unix.MSG_DONTWAIT != 0, swReplay)
	}
	s.switchTailCheck()
	return Pass
}

// switchPoll is pollEvents for a switching socket.
func (s *Socket) switchPoll(fd int, events int16) (revents int16, waitFD int, waitEv int16) {
	sw := s.sw.Load()
	st := s.stream.Load()
	if sw == swBusy || st == nil {
		return 0, -1, 0 // the kicks: every transition writes them (wake.go)
	}
	var one [1]byte
	n, err := st.Peek(one[:])
	if n == 0 && sw == swDone && !errors.Is(err, wire.ErrWouldBlock) {
		s.switchFinish()
		return kernelPoll(fd, events), fd, events
	}
	rev := kernelPoll(fd, events)
	if sw == swReplay {
		rev &^= pollOut
	}
	if n > 0 {
		rev |= pollIn
	}
	rev &= events | pollAlways
	if rev != 0 {
		return rev, -1, 0
	}
	return 0, fd, events
}

// kernelShutdown is shutdown(2) on the kernel socket of an accelerated
// connection: deferred. A FIN there would overtake the records and the
// replay of a switch to kernel TCP, and a read shutdown would keep the
// switch from reading them; the stream carries the program's shutdown.
// The kernel socket gets it at close, or right after a switch
// (switchShutWR), or now when the switch is done.
func (s *Socket) kernelShutdown(fd, how int) {
	if s.sw.Load() == swDone {
		unix.Shutdown(fd, how)
	}
}

// noteFinSent records a shutdown(SHUT_WR) that a fork child made in the
// area (preload/c/forkkeep.c) before the switch's own end of the stream:
// the kernel socket gets it once switched (switchShutWR).
func (s *Socket) noteFinSent(st dataStream) {
	if ds, ok := st.(*directStream); ok && ds.conn.FinSent() {
		s.shutWR.Store(true)
	}
}

// switchShutWR gives the kernel socket the shutdown the program asked for
// while the connection was accelerated.
func (s *Socket) switchShutWR(fd int) {
	switch rd, wr := s.shutRD.Load(), s.shutWR.Load(); {
	case rd && wr:
		unix.Shutdown(fd, unix.SHUT_RDWR)
	case rd:
		unix.Shutdown(fd, unix.SHUT_RD)
	case wr:
		unix.Shutdown(fd, unix.SHUT_WR)
	}
}

// ---- TCP I/O with deadlines (the fd may be blocking or not) -------------

func tcpWait(fd int, events int16, deadline time.Time) error {
	if err := wait.WaitFD(fd, events, deadline); !errors.Is(err, wait.ErrFDTimeout) {
		return err
	}
	return errSwitchTimeout
}

func tcpReadFull(fd int, b []byte, deadline time.Time) error {
	// The records read are acknowledged at once (TCP_QUICKACK sends a
	// delayed ACK now): the peer's program may write a small message
	// right after the switch, which Nagle would hold for that ACK.
	defer unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1)
	for off := 0; off < len(b); {
		n, err := tcpRecv(fd, b[off:], 0, deadline)
		if err != nil {
			return err
		}
		off += n
	}
	return nil
}

// tcpRecv receives (flags: 0 or MSG_PEEK) what is there of b, waiting
// until something is; n > 0, or an error (io.ErrUnexpectedEOF at the
// end of the stream).
func tcpRecv(fd int, b []byte, flags int, deadline time.Time) (int, error) {
	for {
		n, _, err := unix.Recvfrom(fd, b, flags|unix.MSG_DONTWAIT)
		switch {
		case n > 0:
			return n, nil
		case err == nil:
			return 0, io.ErrUnexpectedEOF
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			if err := tcpWait(fd, unix.POLLIN, deadline); err != nil {
				return 0, err
			}
		default:
			return 0, err
		}
	}
}

// tcpWriteSome writes b until done, an error or deadline; it returns how
// much went.
func tcpWriteSome(fd int, b []byte, deadline time.Time) (int, error) {
	off := 0
	for off < len(b) {
		n, err := unix.SendmsgN(fd, b[off:], nil, nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
		switch {
		case n > 0:
			off += n
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			if err := tcpWait(fd, unix.POLLOUT, deadline); err != nil {
				return off, err
			}
		case err != nil:
			return off, err
		}
	}
	return off, nil
}

func tcpWriteAll(fd int, b []byte, deadline time.Time) error {
	_, err := tcpWriteSome(fd, b, deadline)
	return err
}
