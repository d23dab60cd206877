package programs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/bench/results"
	"github.com/sdpshim/sdpshim/internal/podns"
)

// Issue 14's latency and throughput across pods: sockperf ping-pong
// 64 B, iperf3 with 64 KiB writes and redis-benchmark -c 1 GET, the
// server in one pod and its client in another pod reaching it through
// the server pod's address, against the same client in the server's
// pod over 127.0.0.1. The pods are made as the camera's are
// (internal/podns): own network, pid and mount namespaces, server and
// client as different uids that trust each other, the run directory
// shared by a group. Only where the client runs differs between the two,
// so their ratio is what crossing pods costs. The server runs on one CPU
// and the client on another in both placements (podCPUs): on two cores,
// two polling programs that the scheduler puts on one core now and then
// made the sub-microsecond figures bimodal (0.18 or 0.6 us a repeat, in
// either placement), which is the scheduler's placement, not the pods'.

// podPort is where each server listens in its pod.
const podPort = 7100

var podNeeds = []string{"ip", "unshare", "setpriv", "mount", "taskset", "sockperf", "iperf3", "redis-server", "redis-benchmark"}

// podCPUs returns the CPU lists of the server and the client: the
// second and the first CPU this process may run on, or any where it may
// run on one only.
func podCPUs() (server, client string) {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return "", ""
	}
	var cpus []int
	for cpu := 0; cpu < len(set)*64 && len(cpus) < 2; cpu++ {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	if len(cpus) < 2 {
		return "", ""
	}
	return strconv.Itoa(cpus[1]), strconv.Itoa(cpus[0])
}

// pods runs the programs across pods and in the server's pod, one after
// the other, the first of the two alternating from call to call: the
// pair is taken under the same load, so their ratio holds on a machine
// whose load drifts.
func (h *harness) pods(m mode) (map[string]float64, error) {
	order := []bool{true, false}
	if h.podTurn++; h.podTurn%2 == 0 {
		order = []bool{false, true}
	}
	out := map[string]float64{}
	var errs []error
	for _, across := range order {
		prefix := map[bool]string{true: "pods.", false: "podns."}[across]
		got, err := h.podPrograms(m, prefix, across)
		for k, v := range got {
			out[k] = v
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// podPrograms runs the three programs once in mode m, the client across
// pods or in the server's pod, and returns their figures under keys
// prefix+name.
func (h *harness) podPrograms(m mode, prefix string, across bool) (map[string]float64, error) {
	c, scratch, err := h.podCluster("sdpq", "scratch")
	if err != nil {
		return nil, err
	}
	defer c.Close()
	srv, err := c.AddPod("srv")
	if err != nil {
		return nil, err
	}
	cli, dst := srv, "127.0.0.1"
	if across {
		if cli, err = c.AddPod("cli"); err != nil {
			return nil, err
		}
		dst = srv.Addr.String()
	}
	p := podPair{h: h, m: m, srv: srv, cli: cli, scratch: scratch}
	port, secs := fmt.Sprint(podPort), fmt.Sprint(h.seconds())
	out := map[string]float64{}

	res, err := p.run("sockperf", []string{"sockperf", "server", "--tcp", "-i", "0.0.0.0", "-p", port},
		"sockperf", "ping-pong", "--tcp", "-i", dst, "-p", port, "-t", secs, "-m", "64", "--mps", sockperfMPS)
	if err != nil {
		return out, err
	}
	if out[prefix+"pp64.avg"], out[prefix+"pp64.p99"], err = sockperfLatency(res, 64); err != nil {
		return nil, err
	}
	res, err = p.run("iperf3", []string{"iperf3", "-s", "-B", "0.0.0.0", "-p", port},
		"iperf3", "-c", dst, "-p", port, "-t", secs, "-l", "64K", "-J")
	if err != nil {
		return out, err
	}
	if out[prefix+"iperf.gbps"], err = iperfGbps(res); err != nil {
		return out, err
	}
	n := map[bool]string{false: "25000", true: "5000"}[h.quick]
	res, err = p.run("redis", []string{"redis-server", "--port", port, "--bind", "0.0.0.0", "--save", "", "--appendonly", "no",
		"--dir", scratch, "--protected-mode", "no"},
		"redis-benchmark", "-h", dst, "-p", port, "-c", "1", "-n", n, "-t", "get", "--csv")
	if err != nil {
		return out, err
	}
	get, ok := redisRates(res)["GET"]
	if !ok {
		return out, fmt.Errorf("redis-benchmark: no GET rate in\n%s", tailOf(res))
	}
	out[prefix+"redis.c1.GET"] = get
	return out, nil
}

// podCluster makes a cluster of pods as the pod tests do (its namespaces
// named from tag, stale ones of an earlier run removed), with dir, a
// directory in it every pod's uid may write (logs, data). The caller
// closes the cluster.
func (h *harness) podCluster(tag, dir string) (*podns.Cluster, string, error) {
	if os.Geteuid() != 0 {
		return nil, "", errors.New("needs root (network, pid and mount namespaces)")
	}
	podns.RemoveStale(tag)
	c, err := podns.New(fmt.Sprintf("%s%d-", tag, os.Getpid()), h.env.lib, camGID)
	if err != nil {
		return nil, "", err
	}
	shared := filepath.Join(c.Base, dir)
	if err := os.Mkdir(shared, 0o777); err != nil {
		c.Close()
		return nil, "", err
	}
	os.Chmod(shared, 0o777|os.ModeSticky) // past the umask
	return c, shared, nil
}

// podPair runs one server and its client in their pods.
type podPair struct {
	h        *harness
	m        mode
	srv, cli podns.Pod
	scratch  string
}

func (p podPair) proc(uid int, log, cpus string) podns.Proc {
	return podns.Proc{UID: uid, Groups: []int{camGID}, Shim: p.m == shimmed, Log: log, CPUs: cpus,
		Env: []string{fmt.Sprintf("SDPSHIM_ALLOW_UIDS=%d,%d", camUID, anaUID)}}
}

// run starts server in the server's pod, waits for its listener, runs
// the client to its end and returns the client's output. Shimmed, the
// client's log must show its connections accelerated and none fallen
// back.
func (p podPair) run(name string, server []string, client ...string) (string, error) {
	scpu, ccpu := podCPUs()
	s := p.srv.Command(p.proc(anaUID, "", scpu), server[0], server[1:]...)
	var serr bytes.Buffer
	s.Stdout, s.Stderr = io.Discard, &serr
	if err := s.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	defer func() {
		s.Process.Kill()
		<-done
	}()
	if err := waitListenIn(s.Process.Pid, podPort, done); err != nil {
		return "", fmt.Errorf("%s server: %v: %s", name, err, tailOf(serr.String()))
	}
	log := ""
	if p.m == shimmed {
		log = filepath.Join(p.scratch, name+".log")
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.h.limit())
	defer cancel()
	cl := p.cli.Command(p.proc(camUID, log, ccpu), client[0], client[1:]...)
	var cout bytes.Buffer
	cl.Stdout, cl.Stderr = &cout, &cout
	if err := cl.Start(); err != nil {
		return "", err
	}
	stop := context.AfterFunc(ctx, func() { cl.Process.Kill() })
	err := cl.Wait()
	stop()
	if err != nil {
		return "", fmt.Errorf("%s: %v\n%s", strings.Join(client, " "), err, tailOf(cout.String()))
	}
	if _, err := carriedLog(p.m, log, nil); err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return cout.String(), nil
}

// podVersus prints and records issue 14's target for the three
// programs: sdpshim across pods within 10% of sdpshim with the client in
// the server's pod. Each repeat takes the two placements back to back, so
// the figure compared is the median of each repeat's pair (pairedMedians)
// where every repeat has both.
func podVersus(w io.Writer, rec *results.Recorder, vals map[string][2][]float64) {
	for _, f := range podFigures {
		across, one, ok := pairedMedians(vals["pods."+f.key][shimmed], vals["podns."+f.key][shimmed], f.higher)
		if !ok {
			continue
		}
		versus(w, rec, "pods, sdpshim across pods against one namespace, "+f.label, across, one, f.higher)
	}
}

// pairedMedians returns a figure across pods and in one namespace such
// that their ratio is the median of the repeats' ratios, when a and b
// are pairs repeat by repeat (the same length): the pair whose ratio is
// the median (for an even count, the better of the two middle ones, as
// the across-pods figure is judged). Otherwise, each one's median.
func pairedMedians(a, b []float64, higher bool) (across, one float64, ok bool) {
	if len(a) == 0 || len(a) != len(b) {
		x, ok1 := median(a)
		y, ok2 := median(b)
		return x, y, ok1 && ok2 && x > 0 && y > 0
	}
	type pair struct{ a, b, worse float64 }
	var ps []pair
	for i := range a {
		if a[i] <= 0 || b[i] <= 0 {
			return 0, 0, false
		}
		worse := a[i] / b[i]
		if higher {
			worse = b[i] / a[i]
		}
		ps = append(ps, pair{a[i], b[i], worse})
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].worse < ps[j].worse })
	m := ps[(len(ps)-1)/2]
	return m.a, m.b, true
}

// versus prints and records how much worse across is than one (above
// 1: worse by that factor) against the 10% target.
func versus(w io.Writer, rec *results.Recorder, label string, across, one float64, higher bool) {
	worse := across / one
	if higher {
		worse = one / across
	}
	met := worse <= 1.1
	fmt.Fprintf(w, "%s: %.2f against %.2f (%.2fx worse), target within 10%%: %s\n",
		label, across, one, worse, map[bool]string{true: "met", false: "NOT met"}[met])
	rec.Add(results.Figure{Name: label, Unit: "x worse",
		Shim: results.One(worse), Target: &results.Target{Text: "<= 1.1 (within 10%)", Met: met}})
}

// podFigures are the figures podPrograms takes, as rows and in podVersus.
var podFigures = []struct {
	key, label, unit string
	higher           bool
	format           func(float64) string
}{
	{"pp64.avg", "sockperf ping-pong 64 B half-RTT avg", "us", false, f2},
	{"pp64.p99", "sockperf ping-pong 64 B half-RTT p99", "us", false, f2},
	{"iperf.gbps", "iperf3 throughput, 64 KiB writes", "Gbit/s", true, f2},
	{"redis.c1.GET", "redis-benchmark -c 1 GET", "req/s", true, f0},
}

// podRows are the table's rows for podPrograms' figures.
func podRows() []row {
	var rs []row
	for _, w := range []struct{ key, label string }{{"pods.", "across pods"}, {"podns.", "in the server's pod"}} {
		for _, f := range podFigures {
			r := row{key: w.key + f.key, label: f.label + ", " + w.label, unit: f.unit, higher: f.higher, format: f.format}
			if w.key == "pods." && f.key == "redis.c1.GET" {
				r.target, r.judge = ">= 3x", atLeast(3)
			}
			rs = append(rs, r)
		}
	}
	return rs
}
