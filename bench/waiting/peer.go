package waiting

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/bench/internal/childproc"
)

// peerEnv names the wait mode of a child process; its absence means this
// process is not a peer.
const peerEnv = "SDPSHIM_BENCH_WAITING_PEER"

// peerReport is the child's answer, one JSON object on its stdout.
type peerReport struct {
	Err    string `json:",omitempty"`
	Sample sample // from the end of the warm-up to the end of the stream
	Echoed int    // requests answered, warm-up included
}

// ServePeer makes this process the echo side of a measurement when its
// environment names one: it serves one stream, writes its report to
// stdout and exits. Otherwise it returns at once. A program that calls
// Run must call it first thing (sdpshim from an init function, the tests
// from TestMain).
func ServePeer() {
	childproc.Serve(peerEnv, func(mode string) any {
		rep, err := serveEcho(mode)
		if err != nil {
			rep.Err = err.Error()
		}
		return rep
	})
}

// serveEcho answers every read on the first stream the parent opens with
// the same bytes, until the parent closes it.
func serveEcho(mode string) (peerReport, error) {
	var rep peerReport
	e, err := openEnd(childproc.FD, mode)
	unix.Close(childproc.FD)
	if err != nil {
		return rep, err
	}
	defer e.close()
	s, err := e.ch.Accept(time.Now().Add(setupTimeout))
	if err != nil {
		return rep, fmt.Errorf("accept: %w", err)
	}
	defer s.Close()
	var before sample
	measuring := false
	buf := make([]byte, 4096)
	for got := 0; ; {
		if !measuring && got >= warmup*msgSize { // the parent's measured part begins
			before, measuring = e.snapshot(processCPU(), true), true
		}
		n, err := s.Read(buf)
		if err != nil {
			break // the parent closed the stream: the end of the run
		}
		if _, err := s.Write(buf[:n]); err != nil {
			return rep, fmt.Errorf("echo: %w", err)
		}
		got += n
		rep.Echoed = got / msgSize
	}
	rep.Sample = e.snapshot(processCPU(), true).since(before)
	return rep, nil
}

// startPeer starts an echo child waiting in mode and returns it with this
// side's end of the channel.
func startPeer(mode string) (*childproc.Proc, *end, error) {
	pp, fd, err := childproc.Start(peerEnv, mode)
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(fd)
	e, err := openEnd(fd, mode)
	if err != nil {
		pp.Kill()
		return nil, nil, fmt.Errorf("%w (peer: %s)", err, pp.Stderr())
	}
	return pp, e, nil
}

// finishPeer waits for the child's report.
func finishPeer(pp *childproc.Proc) (peerReport, error) {
	var rep peerReport
	if err := pp.Finish(setupTimeout, &rep); err != nil {
		return rep, err
	}
	if rep.Err != "" {
		return rep, errors.New("peer: " + rep.Err)
	}
	return rep, nil
}

// processCPU returns the user+system time of this process so far, ns.
func processCPU() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
