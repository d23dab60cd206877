package programs

import "fmt"

// row is one line of the table: a figure measured in both modes.
type row struct {
	key, label, unit string
	higher           bool // higher is better (throughput)
	absolute         bool // the target is on sdpshim's figure alone
	target           string
	judge            func(kernel, shim float64) bool
	format           func(float64) string
}

func (r row) ratio(k, s float64) float64 {
	if r.higher {
		return s / k
	}
	return k / s
}

func (r row) targetText() string { return r.target }

func f1(v float64) string { return fmt.Sprintf("%.1f", v) }
func f2(v float64) string { return fmt.Sprintf("%.2f", v) }
func f0(v float64) string { return fmt.Sprintf("%.0f", v) }

func atLeast(x float64) func(k, s float64) bool { return func(k, s float64) bool { return s >= x*k } }

var rows = func() []row {
	var rs []row
	for _, size := range sockperfSizes {
		label := fmt.Sprintf("sockperf ping-pong %d B half-RTT", size)
		if size == 65507 {
			label = "sockperf ping-pong 64 KiB (65507 B) half-RTT"
		}
		avg := row{key: fmt.Sprintf("pp%d.avg", size), label: label + " avg", unit: "us", format: f2}
		if size == 64 {
			avg.target = "<= 1 us"
			avg.judge = func(k, s float64) bool { return s <= 1 }
		}
		rs = append(rs, avg, row{key: fmt.Sprintf("pp%d.p99", size), label: label + " p99", unit: "us", format: f2})
	}
	rs = append(rs,
		row{key: "iperf.gbps", label: "iperf3 throughput, 64 KiB writes", unit: "Gbit/s", higher: true, format: f2,
			target: ">= 6x", judge: atLeast(6)},
		row{key: "redis.c1.GET", label: "redis-benchmark -c 1 GET", unit: "req/s", higher: true, format: f0, target: ">= 3x", judge: atLeast(3)},
		row{key: "redis.c1.SET", label: "redis-benchmark -c 1 SET", unit: "req/s", higher: true, format: f0, target: ">= 3x", judge: atLeast(3)},
		row{key: "redis.c50.GET", label: "redis-benchmark -c 50 GET", unit: "req/s", higher: true, format: f0},
		row{key: "redis.c50.SET", label: "redis-benchmark -c 50 SET", unit: "req/s", higher: true, format: f0},
		row{key: "redis.save.c50.SET", label: "redis-benchmark -c 50 SET, BGSAVE every second", unit: "req/s", higher: true, format: f0},
		row{key: "nginx.rps", label: "nginx (1 process) + wrk -c 64", unit: "req/s", higher: true, format: f0, target: ">= 1.5x", judge: atLeast(1.5)},
		row{key: "nginx.lat", label: "nginx + wrk latency avg", unit: "us", format: f1},
		row{key: "nginx2.rps", label: "nginx (master + 2 workers) + wrk -c 64", unit: "req/s", higher: true, format: f0, target: ">= 1.5x", judge: atLeast(1.5)},
		row{key: "nginx2.lat", label: "nginx prefork + wrk latency avg", unit: "us", format: f1},
		row{key: "memcached.ops", label: "memcached, mcload 8 conns 9:1 get:set", unit: "ops/s", higher: true, format: f0, target: ">= 2x", judge: atLeast(2)},
		row{key: "pgbench.tps", label: "postgres pgbench -c 4 -j 2 (fork per backend)", unit: "tps", higher: true, format: f1},
		row{key: "pgbench.connect.tps", label: "postgres pgbench -C -c 4 -j 2 (a connection and a backend per transaction)", unit: "tps", higher: true, format: f1,
			target: ">= 1x", judge: atLeast(1)},
		row{key: "setup.own", label: "connection setup (connect, 64 B round trip, close), own listener", unit: "us/conn", format: f1,
			target: "<= 1.5x kernel", judge: func(k, s float64) bool { return s <= 1.5*k }},
		row{key: "setup.prefork", label: "connection setup, pre-fork server (deferred acceptance)", unit: "us/conn", format: f1,
			target: "<= 1.5x kernel", judge: func(k, s float64) bool { return s <= 1.5*k }},
		row{key: "setup.deferred", label: "connection setup, pre-fork over own listener", unit: "x", format: f2,
			target: "<= 1", absolute: true, judge: func(k, s float64) bool { return s <= 1 }},
		row{key: "fork.first", label: "fork() of a process holding an accelerated connection, its first", unit: "us", format: f0,
			target: "<= 1000 us", absolute: true, judge: func(k, s float64) bool { return s <= 1000 }},
		row{key: "fork.us", label: "fork() of that process, median", unit: "us", format: f0},
		row{key: "fork.use", label: "fork child's first round trip on the inherited connection", unit: "us", format: f1,
			target: "<= 100 us", absolute: true, judge: func(k, s float64) bool { return s <= 100 }},
		row{key: "fork.next", label: "fork child's second round trip", unit: "us", format: f1},
		row{key: "fork.cycle", label: "fork, exit at once and wait, that process with no connection open, median", unit: "us", format: f0},
		row{key: "pass.ns", label: "pipe write/read, unmanaged fd (no preload | preload)", unit: "ns/call", format: f1,
			target: "<= +5 ns", judge: func(k, s float64) bool { return s-k <= 5 }},
		row{key: "start.us", label: "/bin/true start to exit (no preload | preload)", unit: "us", format: f0},
		row{key: "start.core", label: "Go core mapped in a program without sockets", unit: "0/1", format: f0,
			target: "0", absolute: true, judge: func(k, s float64) bool { return s == 0 }},
	)
	rs = append(rs, podRows()...)
	rs = append(rs, cameraRows()...)
	return append(rs, costRows()...)
}()

// costRows are the cost table's rows: per message, server side.
func costRows() []row {
	var rs []row
	for _, cs := range costShapes {
		for _, c := range costMetrics {
			r := row{key: "cost." + cs.key + "." + c.key, label: "cost: " + cs.label + ", " + c.label + "/msg", unit: "per msg", format: f2}
			if cs.key == "ppev" {
				switch c.key {
				case "csw":
					r.target, r.absolute = "<= 1.5", true
					r.judge = func(k, s float64) bool { return s <= 1.5 }
				case "sys":
					r.target, r.absolute = "<= 3", true
					r.judge = func(k, s float64) bool { return s <= 3 }
				}
			}
			rs = append(rs, r)
		}
	}
	return rs
}

// cameraRows are the camera scenario's rows, across pods and in one
// namespace (camera.go).
func cameraRows() []row {
	var rs []row
	for _, w := range []struct{ key, label string }{{"campods.", "across pods"}, {"camns.", "one namespace"}} {
		l := fmt.Sprintf("camera %dx%d fps 640x480x3, %s: ", camStreams, camFPS, w.label)
		rs = append(rs,
			row{key: w.key + "mbps", label: l + "throughput", unit: "MB/s", higher: true, format: f1},
			row{key: w.key + "cv", label: l + "throughput CV per 100 ms", unit: "", format: f2},
			row{key: w.key + "p50", label: l + "frame latency p50", unit: "us", format: f0},
			row{key: w.key + "p99", label: l + "frame latency p99", unit: "us", format: f0})
	}
	return rs
}
