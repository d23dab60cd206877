package waiting

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/mux"
)

// msgSize is the size of a request and of its reply.
const msgSize = 64

// warmup round trips run before each measured part.
const warmup = 50

// measurement is one run of one mode: a shape, or idle.
type measurement struct {
	Lat  []int64 // half round trips, ns (none when idle)
	Msgs int     // requests in the measured part
	Wall time.Duration
	Both sample // client and server together
}

// measure runs shape s for dur with both ends waiting in mode.
func measure(mode string, s Shape, dur time.Duration, seed uint64) (measurement, error) {
	return withPair(mode, func(st *mux.Stream) (measurement, error) {
		return drive(st, s, dur, seed)
	})
}

// measureIdle keeps an accelerated connection idle for d, both ends
// blocked in Read, after one round trip.
func measureIdle(mode string, d time.Duration) (measurement, error) {
	return withPair(mode, func(st *mux.Stream) (measurement, error) {
		start := time.Now()
		st.SetReadDeadline(start.Add(d))
		var b [1]byte
		n, err := st.Read(b[:])
		if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			return measurement{}, fmt.Errorf("idle read: %d bytes, %v", n, err)
		}
		return measurement{Wall: time.Since(start)}, nil
	})
}

// withPair starts an echo child waiting in mode, opens a stream to it,
// warms it up and runs part, whose CPU time and wait counts it measures
// on both sides.
func withPair(mode string, part func(*mux.Stream) (measurement, error)) (measurement, error) {
	pp, e, err := startPeer(mode)
	if err != nil {
		return measurement{}, err
	}
	m, err := func() (measurement, error) {
		defer e.close()
		st, err := e.ch.Open()
		if err != nil {
			return measurement{}, fmt.Errorf("open: %w", err)
		}
		defer st.Close()
		st.SetDeadline(time.Now().Add(setupTimeout))
		if err := roundTrips(st, warmup); err != nil {
			return measurement{}, fmt.Errorf("warm-up: %w", err)
		}
		st.SetDeadline(time.Time{})
		before := e.snapshot(processCPU(), true)
		m, err := part(st)
		if err != nil {
			return m, err
		}
		m.Both = e.snapshot(processCPU(), true).since(before)
		return m, nil
	}()
	rep, perr := finishPeer(pp)
	if err != nil {
		return m, err
	}
	if perr != nil {
		return m, perr
	}
	if want := m.Msgs + warmup; rep.Echoed != want {
		return m, fmt.Errorf("the peer echoed %d requests, want %d", rep.Echoed, want)
	}
	m.Both = m.Both.add(rep.Sample)
	return m, nil
}

// roundTrips sends n requests, each after the previous reply.
func roundTrips(st *mux.Stream, n int) error {
	req, rep := make([]byte, msgSize), make([]byte, msgSize)
	for range n {
		if _, err := st.Write(req); err != nil {
			return err
		}
		if _, err := io.ReadFull(st, rep); err != nil {
			return err
		}
	}
	return nil
}

// drive sends requests shaped by s for dur and times their round trips.
// It runs on a locked thread with a timer slack of 1 ns, so that pauses
// of tens of microseconds (nanosleep) are kept to within a wakeup;
// Go's own timers round them up to a millisecond.
func drive(st *mux.Stream, s Shape, dur time.Duration, seed uint64) (measurement, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)            // best effort: pauses are longer without it
	defer unix.Prctl(unix.PR_SET_TIMERSLACK, 50_000, 0, 0, 0) // the kernel's default
	req, rep := make([]byte, msgSize), make([]byte, msgSize)
	m := measurement{Lat: make([]int64, 0, 1<<16)}
	start := time.Now()
	st.SetDeadline(start.Add(dur + setupTimeout))
	p := newPacer(s, start, seed)
	at := start
	for {
		sleepUntil(at)
		sent := time.Now()
		if sent.Sub(start) >= dur {
			break
		}
		if _, err := st.Write(req); err != nil {
			return m, err
		}
		if _, err := io.ReadFull(st, rep); err != nil {
			return m, err
		}
		got := time.Now()
		m.Lat = append(m.Lat, int64(got.Sub(sent))/2)
		m.Msgs++
		at = p.next(sent, got)
	}
	m.Wall = time.Since(start)
	return m, nil
}

// sleepUntil sleeps the calling thread until t (at once when passed).
func sleepUntil(t time.Time) {
	for {
		d := time.Until(t)
		if d <= 0 {
			return
		}
		ts := unix.NsecToTimespec(int64(d))
		if unix.Nanosleep(&ts, nil) == nil {
			return
		}
	}
}
