package programs

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/bench/results"
	"github.com/sdpshim/sdpshim/internal/podns"
)

// Seed 000's camera scenario across pods (issue 14): camStreams camera
// pods each stream camFPS frames/s of camFrame bytes to one analytics pod
// (csrc/camera.c), the pods made as the pod tests make them
// (internal/podns): own network, pid and mount namespaces, the cameras
// and the analytics as different uids that trust each other, the run
// directory shared by a group. The same run in one namespace (every
// camera beside the analytics, over 127.0.0.1) gives the figures that
// the cross-pod ones are held against. Throughput is the mean of the
// bytes read per camBin while the cameras send, its spread their
// coefficient of variation; a frame's latency runs from the start of its
// write to its last byte read; each stream's first frame (page faults of
// fresh buffers) is left out.

const (
	camStreams = 12
	camFPS     = 25
	camFrame   = 640 * 480 * 3
	camBin     = 100 * time.Millisecond
	camPort    = 7000
	camUID     = 2001 // the camera pods
	anaUID     = 2002 // the analytics pod
	camGID     = 2000 // the run directory's group
)

var camNeeds = []string{"gcc", "ip", "iptables", "unshare", "setpriv", "mount"}

func (h *harness) cameraPods(m mode) (map[string]float64, error) {
	return h.camera(m, "campods.", true)
}
func (h *harness) cameraOneNS(m mode) (map[string]float64, error) {
	return h.camera(m, "camns.", false)
}

// camera runs the scenario once in mode m, across pods or in one pod's
// namespace, and returns its figures under keys prefix+name.
func (h *harness) camera(m mode, prefix string, pods bool) (map[string]float64, error) {
	bin, err := h.cprog("camera", "-pthread")
	if err != nil {
		return nil, err
	}
	os.Chmod(h.env.tmp, 0o755) // the pods' uids run bin
	c, logs, err := h.podCluster("sdpb", "logs")
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ana, err := c.AddPod("ana")
	if err != nil {
		return nil, err
	}
	cams, dst := make([]podns.Pod, camStreams), "127.0.0.1"
	for i := range cams {
		cams[i] = ana
		if pods {
			if cams[i], err = c.AddPod(fmt.Sprintf("cam%d", i+1)); err != nil {
				return nil, err
			}
			dst = ana.Addr.String()
		}
	}

	secs := h.seconds() + 2
	frames := secs * camFPS
	interval := int64(time.Second / camFPS)
	// Late enough for every program to be up and connected.
	start := monoNow() + int64(3*time.Second)
	limit := time.Duration(secs)*time.Second + 60*time.Second
	proc := func(uid int, log string) podns.Proc {
		return podns.Proc{UID: uid, Groups: []int{camGID}, Shim: m == shimmed, Log: log,
			Env: []string{fmt.Sprintf("SDPSHIM_ALLOW_UIDS=%d,%d", camUID, anaUID)}}
	}
	recv := ana.Command(proc(anaUID, ""), bin, "recv", strconv.Itoa(camPort), strconv.Itoa(camStreams),
		strconv.Itoa(frames), strconv.Itoa(camFrame), strconv.FormatInt(start, 10), strconv.FormatInt(int64(camBin), 10))
	var rout, rerr bytes.Buffer
	recv.Stdout, recv.Stderr = &rout, &rerr
	if err := recv.Start(); err != nil {
		return nil, err
	}
	rdone := make(chan error, 1)
	go func() { rdone <- recv.Wait() }()
	defer recv.Process.Kill()
	if err := waitListenIn(recv.Process.Pid, camPort, rdone); err != nil {
		return nil, fmt.Errorf("analytics: %v: %s", err, tailOf(rerr.String()))
	}
	var senders []*exec.Cmd
	var serrs []*bytes.Buffer
	camLogs := make([]string, camStreams)
	for i, p := range cams {
		if m == shimmed {
			camLogs[i] = filepath.Join(logs, fmt.Sprintf("cam%d.log", i+1))
		}
		s := p.Command(proc(camUID, camLogs[i]), bin, "send", dst, strconv.Itoa(camPort), strconv.Itoa(i),
			strconv.Itoa(frames), strconv.Itoa(camFrame), strconv.FormatInt(start+int64(i)*interval/camStreams, 10),
			strconv.FormatInt(interval, 10))
		serr := &bytes.Buffer{}
		s.Stderr = serr
		if err := s.Start(); err != nil {
			return nil, err
		}
		defer s.Process.Kill()
		senders, serrs = append(senders, s), append(serrs, serr)
	}
	timer := time.AfterFunc(limit, func() {
		recv.Process.Kill()
		for _, s := range senders {
			s.Process.Kill()
		}
	})
	defer timer.Stop()
	for i, s := range senders {
		if err := s.Wait(); err != nil {
			return nil, fmt.Errorf("camera %d: %v: %s", i+1, err, tailOf(serrs[i].String()))
		}
	}
	if err := <-rdone; err != nil {
		return nil, fmt.Errorf("analytics: %v: %s", err, tailOf(rerr.String()))
	}
	out, err := camFigures(rout.String(), frames, secs)
	if err != nil {
		return nil, err
	}
	res := map[string]float64{}
	for k, v := range out {
		res[prefix+k] = v
	}
	return carriedBy(m, res, func() (acc, fell uint64, err error) {
		for _, l := range camLogs {
			b, err := os.ReadFile(l)
			if err != nil {
				return 0, 0, fmt.Errorf("camera log: %w", err)
			}
			acc += uint64(strings.Count(string(b), `msg="connected accelerated"`))
			fell += uint64(strings.Count(string(b), `msg="connection stays on kernel TCP"`))
		}
		if acc != camStreams || fell != 0 {
			return 0, 0, fmt.Errorf("not carried by the shim: %d of %d cameras accelerated, %d fell back", acc, camStreams, fell)
		}
		return acc, fell, nil
	})
}

// camFigures reads the analytics' report: throughput (mean MB/s over the
// whole bins of the sending time) and its CV, frame latency p50 and p99
// (us), each stream's first frame left out.
func camFigures(report string, frames, secs int) (map[string]float64, error) {
	var lat, bins []float64
	n := 0
	for _, l := range strings.Split(report, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 2 && f[0] == "lat":
			if n%frames != 0 {
				lat = append(lat, atof(f[1])/1e3)
			}
			n++
		case len(f) == 3 && f[0] == "bin":
			bins = append(bins, atof(f[2])/camBin.Seconds()/1e6)
		}
	}
	whole := int(time.Duration(secs) * time.Second / camBin)
	if n != frames*camStreams || len(bins) < whole {
		return nil, fmt.Errorf("analytics reported %d frames of %d, %d bins of %d", n, frames*camStreams, len(bins), whole)
	}
	bins = bins[:whole]
	mean, sd := meanSD(bins)
	sort.Float64s(lat)
	return map[string]float64{
		"mbps": mean, "cv": sd / mean,
		"p50": lat[len(lat)/2], "p99": lat[(len(lat)*99)/100],
	}, nil
}

func meanSD(xs []float64) (mean, sd float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	if len(xs) > 1 {
		sd = math.Sqrt(sd / float64(len(xs)-1))
	}
	return mean, sd
}

// waitListenIn waits until the process pid's network namespace has a
// TCP listener on port (/proc/PID/net/tcp; no probing connection, which
// the analytics would take for a camera).
func waitListenIn(pid, port int, done chan error) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if listens(fmt.Sprintf("/proc/%d/net/tcp", pid), port) {
			return nil
		}
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("ended: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("nothing listens on port %d", port)
}

func monoNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// cameraVersus prints and records issue 14's target for the camera:
// sdpshim across pods within 10% of sdpshim in one namespace, for
// throughput and frame latency (medians of the repeats).
func cameraVersus(w io.Writer, rec *results.Recorder, vals map[string][2][]float64) {
	for _, f := range []struct {
		key, label string
		higher     bool
	}{{"mbps", "throughput", true}, {"p50", "frame latency p50", false}, {"p99", "frame latency p99", false}} {
		pods, ok1 := median(vals["campods."+f.key][shimmed])
		one, ok2 := median(vals["camns."+f.key][shimmed])
		if !ok1 || !ok2 || pods <= 0 || one <= 0 {
			continue
		}
		versus(w, rec, "camera, sdpshim across pods against one namespace, "+f.label, pods, one, f.higher)
	}
}
