package programs

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sdpshim/sdpshim/bench/internal/cbuild"
)

// A measure runs one program pair in one mode and returns its figures
// by row key (rows.go). A figure that could not be taken is absent, and
// the error says why.
type measure struct {
	name  string
	needs []string // programs on PATH
	run   func(h *harness, m mode) (map[string]float64, error)
}

var measures = []measure{
	{"sockperf", []string{"sockperf"}, (*harness).sockperf},
	{"iperf3", []string{"iperf3"}, (*harness).iperf3},
	{"redis", []string{"redis-server", "redis-benchmark"}, (*harness).redis},
	{"redis save", []string{"redis-server", "redis-benchmark"}, (*harness).redisSave},
	{"nginx", []string{"nginx", "wrk"}, (*harness).nginx},
	{"nginx prefork", []string{"nginx", "wrk"}, (*harness).nginxPrefork},
	{"memcached", []string{"memcached", "gcc"}, (*harness).memcached},
	{"postgres", []string{"gcc"}, (*harness).postgres},
	{"setup", []string{"gcc"}, (*harness).setup},
	{"fork", []string{"gcc"}, (*harness).forkUse},
	{"message costs", []string{"gcc", "perf"}, (*harness).msgCosts},
	{"pods", podNeeds, (*harness).pods},
	{"camera pods", camNeeds, (*harness).cameraPods},
	{"camera one namespace", camNeeds, (*harness).cameraOneNS},
}

// sockperfSizes are the ping-pong message sizes; 65507 is the largest
// sockperf accepts (its "64 KiB").
var sockperfSizes = []int{16, 64, 1024, 65507}

// sockperfMPS is the ping-pong rate cap passed to sockperf. Left to its
// default, sockperf sizes its table of send times for at most 600,000
// round trips a second and exits with "_seqN > m_maxSequenceNo" when a run
// goes faster (a round trip under 1.67 us, which an accelerated run makes
// whenever both sides get a core). Two million is above any round trip
// this transport makes, so it never paces, and costs the client about
// 16 bytes of table per round trip.
const sockperfMPS = "2000000"

var (
	reAvg = regexp.MustCompile(`avg-latency=([\d.]+)`)
	reP99 = regexp.MustCompile(`percentile 99\.000 =\s*([\d.]+)`)
)

func (h *harness) sockperf(m mode) (map[string]float64, error) {
	rd, port, err := h.pair()
	if err != nil {
		return nil, err
	}
	srv, err := startServer(h.env.of(m, rd), nil, "sockperf", "server", "--tcp", "-i", "127.0.0.1", "-p", fmt.Sprint(port))
	if err != nil {
		return nil, err
	}
	defer srv.stop(syscall.SIGKILL)
	if err := srv.waitListen(port); err != nil {
		return nil, err
	}
	out := map[string]float64{}
	sizes := sockperfSizes
	if h.quick {
		sizes = []int{64, 65507} // the sizes with targets
	}
	for _, size := range sizes {
		res, err := runClient(h.env.of(m, rd), nil, h.limit(), "sockperf", "ping-pong", "--tcp", "-i", "127.0.0.1",
			"-p", fmt.Sprint(port), "-t", fmt.Sprint(h.seconds()), "-m", fmt.Sprint(size), "--mps", sockperfMPS)
		if err != nil {
			return out, err
		}
		avg, p99, err := sockperfLatency(res, size)
		if err != nil {
			return out, err
		}
		out[fmt.Sprintf("pp%d.avg", size)] = avg
		out[fmt.Sprintf("pp%d.p99", size)] = p99
	}
	return carried(m, rd, out)
}

// sockperfLatency reads a ping-pong run's half round trip, average and
// p99, in microseconds.
func sockperfLatency(res string, size int) (avg, p99 float64, err error) {
	a, p := reAvg.FindStringSubmatch(res), reP99.FindStringSubmatch(res)
	if a == nil || p == nil {
		return 0, 0, fmt.Errorf("sockperf ping-pong -m %d: no latency in\n%s", size, tailOf(res))
	}
	return atof(a[1]), atof(p[1]), nil
}

func (h *harness) iperf3(m mode) (map[string]float64, error) {
	rd, port, err := h.pair()
	if err != nil {
		return nil, err
	}
	srv, err := startServer(h.env.of(m, rd), nil, "iperf3", "-s", "-B", "127.0.0.1", "-p", fmt.Sprint(port))
	if err != nil {
		return nil, err
	}
	defer srv.stop(syscall.SIGKILL)
	if err := srv.waitListen(port); err != nil {
		return nil, err
	}
	res, err := runClient(h.env.of(m, rd), nil, h.limit(), "iperf3", "-c", "127.0.0.1", "-p", fmt.Sprint(port),
		"-t", fmt.Sprint(h.seconds()), "-l", "64K", "-J")
	if err != nil {
		return nil, err
	}
	gbps, err := iperfGbps(res)
	if err != nil {
		return nil, err
	}
	return carried(m, rd, map[string]float64{"iperf.gbps": gbps})
}

// iperfGbps reads the received throughput of an iperf3 -J run, Gbit/s.
func iperfGbps(res string) (float64, error) {
	var r struct {
		Error string `json:"error"`
		End   struct {
			Received struct {
				BPS float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(res), &r); err != nil || r.Error != "" {
		return 0, fmt.Errorf("iperf3: %v %s", err, r.Error)
	}
	return r.End.Received.BPS / 1e9, nil
}

func (h *harness) redis(m mode) (map[string]float64, error) {
	rd, port, err := h.pair()
	if err != nil {
		return nil, err
	}
	srv, err := startRedis(h.env.of(m, rd), port, "", h.env.tmp)
	if err != nil {
		return nil, err
	}
	defer srv.stop(syscall.SIGKILL)
	out := map[string]float64{}
	var errs []string
	for _, c := range []int{1, 50} {
		n := map[bool]int{false: 50000, true: 10000}[h.quick]
		if c == 1 {
			n /= 2
		}
		res, err := runClient(h.env.of(m, rd), nil, h.limit(), "redis-benchmark", "-p", fmt.Sprint(port),
			"-c", fmt.Sprint(c), "-n", fmt.Sprint(n), "-t", "set,get", "--csv")
		if err != nil {
			errs = append(errs, fmt.Sprintf("-c %d: %v", c, firstLine(err.Error())))
			continue
		}
		for t, rps := range redisRates(res) {
			out[fmt.Sprintf("redis.c%d.%s", c, t)] = rps
		}
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("redis-benchmark %s", strings.Join(errs, "; "))
	}
	return carried(m, rd, out)
}

// redisSave measures redis-benchmark -c 50 SET against a redis-server
// that saves every second it saw a change: a BGSAVE fork child about once
// a second, which never touches the clients' connections (the shim keeps
// them accelerated across the fork; before, the first save switched them
// all to kernel TCP for the rest of the run).
func (h *harness) redisSave(m mode) (map[string]float64, error) {
	rd, port, err := h.pair()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(h.env.tmp, "redis-save")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	srv, err := startRedis(h.env.of(m, rd), port, "1 1", dir)
	if err != nil {
		return nil, err
	}
	defer srv.stop(syscall.SIGKILL)
	// A second after its start the server saves at its first change, so
	// that the run (a few seconds shimmed) sees several saves.
	time.Sleep(1100 * time.Millisecond)
	n := map[bool]int{false: 1000000, true: 200000}[h.quick]
	res, err := runClient(h.env.of(m, rd), nil, h.limit(), "redis-benchmark", "-p", fmt.Sprint(port),
		"-c", "50", "-n", fmt.Sprint(n), "-t", "set", "--csv")
	if err != nil {
		return nil, fmt.Errorf("redis-benchmark: %v", firstLine(err.Error()))
	}
	set, ok := redisRates(res)["SET"]
	if !ok {
		return nil, fmt.Errorf("redis-benchmark: no SET rate in\n%s", tailOf(res))
	}
	return carried(m, rd, map[string]float64{"redis.save.c50.SET": set})
}

// startRedis starts redis-server on 127.0.0.1:port in environment env
// with the save rules save ("": none) and the working directory dir, and
// waits until it listens.
func startRedis(env []string, port int, save, dir string) (*server, error) {
	srv, err := startServer(env, nil, "redis-server", "--port", fmt.Sprint(port), "--bind", "127.0.0.1",
		"--save", save, "--appendonly", "no", "--dir", dir)
	if err != nil {
		return nil, err
	}
	if err := srv.waitListen(port); err != nil {
		srv.stop(syscall.SIGKILL)
		return nil, err
	}
	return srv, nil
}

// redisRates reads redis-benchmark --csv output: requests per second by
// test name (SET, GET).
func redisRates(res string) map[string]float64 {
	out := map[string]float64{}
	for _, l := range strings.Split(res, "\n") {
		f := strings.Split(l, ",")
		if len(f) > 1 && (f[0] == `"SET"` || f[0] == `"GET"`) {
			out[strings.Trim(f[0], `"`)] = atof(strings.Trim(f[1], `"`))
		}
	}
	return out
}

var (
	reRPS = regexp.MustCompile(`Requests/sec:\s*([\d.]+)`)
	reLat = regexp.MustCompile(`Latency\s+([\d.]+)(us|ms|s)`)
)

// nginx measures one nginx process serving wrk (master_process off):
// the process that accepts also serves.
func (h *harness) nginx(m mode) (map[string]float64, error) {
	return h.nginxShape(m, "nginx", "master_process off;\nworker_processes 1;")
}

// nginxPrefork measures the pre-fork shape: a master and two workers
// forked from it, which share the listener inherited from the master
// (deferred acceptance: the worker that first uses a connection claims
// it).
func (h *harness) nginxPrefork(m mode) (map[string]float64, error) {
	return h.nginxShape(m, "nginx2", "master_process on;\nworker_processes 2;")
}

// nginxShape runs nginx with the process lines procs and measures it
// with wrk: figures key+".rps" and key+".lat".
func (h *harness) nginxShape(m mode, key, procs string) (map[string]float64, error) {
	rd, port, err := h.pair()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(h.env.tmp, "nginx")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte(strings.Repeat("sdpshim ", 64)), 0o644); err != nil {
		return nil, err
	}
	// user: workers of a master started as root would run as nobody,
	// who cannot read the scratch directory (ignored when not root).
	conf := fmt.Sprintf(`daemon off;
user root root;
%[3]s
pid %[1]s/nginx.pid;
error_log %[1]s/error.log error;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path %[1]s;
  proxy_temp_path %[1]s;
  fastcgi_temp_path %[1]s;
  uwsgi_temp_path %[1]s;
  scgi_temp_path %[1]s;
  server { listen 127.0.0.1:%[2]d; root %[1]s; }
}
`, dir, port, procs)
	cf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	srv, err := startServer(h.env.of(m, rd), nil, "nginx", "-p", dir, "-c", cf, "-e", filepath.Join(dir, "error.log"))
	if err != nil {
		return nil, err
	}
	defer srv.stop(syscall.SIGKILL)
	if err := srv.waitListen(port); err != nil {
		return nil, err
	}
	// One wrk thread, 64 connections: wrk refuses fds past its loop size,
	// and the shim's own descriptors push the program's up.
	res, err := runClient(h.env.of(m, rd), nil, h.limit(), "wrk", "-t", "1", "-c", "64", "-d", fmt.Sprint(h.seconds()),
		fmt.Sprintf("http://127.0.0.1:%d/index.html", port))
	if err != nil {
		return nil, err
	}
	r, l := reRPS.FindStringSubmatch(res), reLat.FindStringSubmatch(res)
	if r == nil || l == nil {
		return nil, fmt.Errorf("wrk: no figures in\n%s", res)
	}
	if strings.Contains(res, "Socket errors") || strings.Contains(res, "Non-2xx") {
		return nil, fmt.Errorf("wrk reported errors:\n%s", res)
	}
	lat := atof(l[1]) * map[string]float64{"us": 1, "ms": 1e3, "s": 1e6}[l[2]]
	return carried(m, rd, map[string]float64{key + ".rps": atof(r[1]), key + ".lat": lat})
}

func (h *harness) memcached(m mode) (map[string]float64, error) {
	mcload, err := h.cprog("mcload", "-pthread")
	if err != nil {
		return nil, err
	}
	rd, port, err := h.pair()
	if err != nil {
		return nil, err
	}
	srv, err := startServer(h.env.of(m, rd), nil, "memcached", "-l", "127.0.0.1", "-p", fmt.Sprint(port), "-U", "0", "-t", "2", "-u", "root")
	if err != nil {
		return nil, err
	}
	defer srv.stop(syscall.SIGKILL)
	if err := srv.waitListen(port); err != nil {
		return nil, err
	}
	res, err := runClient(h.env.of(m, rd), nil, h.limit(), mcload, "-p", fmt.Sprint(port), "-c", "8", "-d", fmt.Sprint(h.seconds()), "-s", "100")
	if err != nil {
		return nil, err
	}
	var r struct {
		OPS    float64 `json:"ops_per_sec"`
		Errors int     `json:"errors"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(res)), &r); err != nil || r.Errors != 0 {
		return nil, fmt.Errorf("mcload: %v %s", err, res)
	}
	return carried(m, rd, map[string]float64{"memcached.ops": r.OPS})
}

func atof(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// cprog builds one of the embedded C programs once per run.
func (h *harness) cprog(name string, flags ...string) (string, error) {
	if p, ok := h.built[name]; ok {
		return p, nil
	}
	src, err := csrc.ReadFile("csrc/" + name + ".c")
	if err != nil {
		return "", err
	}
	files := map[string][]byte{name + ".c": src}
	// The headers the programs share go beside them.
	hs, _ := fs.Glob(csrc, "csrc/*.h")
	for _, hp := range hs {
		if b, err := csrc.ReadFile(hp); err == nil {
			files[filepath.Base(hp)] = b
		}
	}
	out, err := cbuild.Build(filepath.Join(h.env.tmp, "bin"), name+".c", files, flags...)
	if err != nil {
		return "", err
	}
	h.built[name] = out
	return out, nil
}

// limit bounds one client run.
func (h *harness) limit() time.Duration {
	return time.Duration(h.seconds())*time.Second + 60*time.Second
}
