package soak

import (
	"bufio"
	"fmt"
	"os"
	"time"
)

// usage is what the server holds at one moment.
type usage struct {
	rssKB int // VmRSS
	fds   int // entries of /proc/PID/fd
}

// sample reads pid's usage from /proc.
func sample(pid int) (usage, error) {
	var u usage
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return u, err
	}
	u.fds = len(ents)
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "VmRSS: %d kB", &u.rssKB); err == nil {
			return u, nil
		}
	}
	return u, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// settled samples pid every 100 ms until its fd count stops falling and,
// with a reference (ref.fds > 0), is at most ref's, and its RSS has not
// moved by more than rssQuiet for rssSettle; or for 10 s. It returns the
// last sample. What a connection held is released shortly after its end
// (under the shim: once the peer's end is seen and a grace for a caller
// still inside has passed; the Go heap's free pages once no connection
// has ended for a second, shim/reap.go).
func settled(pid int, ref usage) (usage, error) {
	deadline := time.Now().Add(10 * time.Second)
	prev, err := sample(pid)
	rssAt, rssSince := prev.rssKB, time.Now()
	for err == nil {
		time.Sleep(100 * time.Millisecond)
		var u usage
		if u, err = sample(pid); err != nil {
			break
		}
		if d := u.rssKB - rssAt; d > rssQuiet || d < -rssQuiet {
			rssAt, rssSince = u.rssKB, time.Now()
		}
		done := u.fds == prev.fds && (ref.fds == 0 || u.fds <= ref.fds) && time.Since(rssSince) >= rssSettle
		if done || time.Now().After(deadline) {
			return u, nil
		}
		prev = u
	}
	return usage{}, err
}

// rssQuiet (KiB) and rssSettle: an RSS that moved less than rssQuiet for
// rssSettle has settled.
const (
	rssQuiet  = 64
	rssSettle = 3 * time.Second
)

// point is one sample of a curve, at t since the run began (the
// interval times the sample's number).
type point struct {
	t time.Duration
	usage
}

// sampler samples a process every interval until stopped.
type sampler struct {
	stop chan struct{}
	done chan []point
}

func startSampler(pid int, interval time.Duration) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan []point, 1)}
	go func() {
		var pts []point
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := 0; ; i++ {
			if u, err := sample(pid); err == nil {
				pts = append(pts, point{time.Duration(i) * interval, u})
			}
			select {
			case <-s.stop:
				s.done <- pts
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// end stops the sampler and returns its samples.
func (s *sampler) end() []point {
	close(s.stop)
	return <-s.done
}
