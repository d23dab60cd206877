package agent

import (
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/sdpshim/sdpshim/shim/stats"
)

// Process labels of every per-process series: pid as the agent's pid
// namespace numbers the process (with hostPID, the node's pid), or
// "<pidns inode>/<pid>" when that namespace cannot see it; comm; pod_uid
// from its cgroup, empty when it names no pod (an empty label is no label
// to Prometheus).
var processLabels = []string{"pid", "comm", "pod_uid"}

func desc(name, help string, extra ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, append(append([]string(nil), processLabels...), extra...), nil)
}

var (
	descOpen        = desc("sdpshim_connections_open", "Connections registered now.")
	descOpened      = desc("sdpshim_connections_opened_total", "Connections registered since the process started.")
	descAccelerated = desc("sdpshim_connections_accelerated_total", "Connections opened on shared memory or RDMA.")
	descFallbacks   = desc("sdpshim_fallbacks_total", "Connections left on kernel TCP, by reason code (docs/reasons.md).", "code", "reason")
	descBytes       = desc("sdpshim_bytes_total", "Payload bytes moved by accelerated connections, by direction.", "direction")
	descMessages    = desc("sdpshim_messages_total", "Send or receive calls of accelerated connections, by direction.", "direction")
	descStalls      = desc("sdpshim_flow_credit_stalls_total", "Times a stream with bytes queued waited for credit or window.")
	descTransport   = desc("sdpshim_connections_open_by_transport", "Open connections by what carries them (shm, rdma, tcp).", "transport")

	descProcesses  = prometheus.NewDesc("sdpshim_agent_processes", "Shimmed processes whose stats this scrape read.", nil, nil)
	descReadErrors = prometheus.NewDesc("sdpshim_agent_process_read_errors", "Shimmed processes whose stats this scrape could not read.", nil, nil)
)

// Collector is a prometheus.Collector that reads, at every scrape, the
// snapshot of every shimmed process serving stats in RunDir (as
// `sdpshim stats` does) and exports its counters labelled by process and
// pod. It keeps nothing between scrapes but what Learn hands on.
type Collector struct {
	RunDir string
	// Timeout bounds the read of one process's snapshot.
	Timeout time.Duration
	// Learn, if set, is called with every snapshot read (Trace.Learn).
	Learn func(*stats.Snapshot)
	Log   logrus.FieldLogger
}

var _ prometheus.Collector = (*Collector)(nil)

// Describe sends every descriptor Collect may use.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descOpen, descOpened, descAccelerated, descFallbacks, descBytes,
		descMessages, descStalls, descTransport, descProcesses, descReadErrors} {
		ch <- d
	}
}

// Collect reads every process's snapshot and sends its series. A process
// that cannot be read is counted and logged, and the others are still
// sent; a process that exited meanwhile is left out silently.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	eps, err := stats.List(c.RunDir)
	if err != nil {
		c.Log.WithError(err).Warn("agent: list stats sockets")
	}
	read, failed := 0, 0
	for _, ep := range eps {
		s, pid, err := stats.FetchPID(ep.Path, c.Timeout)
		switch {
		case errors.Is(err, stats.ErrStale):
			continue
		case err != nil:
			failed++
			c.Log.WithError(err).WithField("pid", ep.PID).Warn("agent: read stats")
			continue
		}
		read++
		if c.Learn != nil {
			c.Learn(s)
		}
		label := strconv.Itoa(pid)
		pod := ""
		if pid > 0 {
			pod = PodUID(pid)
		} else {
			label = strconv.FormatUint(ep.PIDNS, 10) + "/" + strconv.Itoa(s.Process.PID)
		}
		sendProcess(ch, s, label, pod)
	}
	ch <- prometheus.MustNewConstMetric(descProcesses, prometheus.GaugeValue, float64(read))
	ch <- prometheus.MustNewConstMetric(descReadErrors, prometheus.GaugeValue, float64(failed))
}

// sendProcess sends one process's series.
func sendProcess(ch chan<- prometheus.Metric, s *stats.Snapshot, pid, pod string) {
	l := []string{pid, s.Process.Comm, pod}
	send := func(d *prometheus.Desc, t prometheus.ValueType, v uint64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(d, t, float64(v), append(l[:3:3], extra...)...)
	}
	t := s.Totals
	send(descOpen, prometheus.GaugeValue, t.ConnsOpen)
	send(descOpened, prometheus.CounterValue, t.ConnsOpened)
	send(descAccelerated, prometheus.CounterValue, t.Accelerated)
	send(descBytes, prometheus.CounterValue, t.BytesSent, "sent")
	send(descBytes, prometheus.CounterValue, t.BytesReceived, "received")
	send(descMessages, prometheus.CounterValue, t.MessagesSent, "sent")
	send(descMessages, prometheus.CounterValue, t.MessagesReceived, "received")
	send(descStalls, prometheus.CounterValue, s.Flow.Stalls)
	for _, r := range s.Fallbacks {
		send(descFallbacks, prometheus.CounterValue, r.Count, strconv.Itoa(r.Code), r.Name)
	}
	byTransport := map[string]uint64{}
	for _, cs := range s.Connections {
		byTransport[cs.Transport]++
	}
	for tr, n := range byTransport {
		send(descTransport, prometheus.GaugeValue, n, tr)
	}
}
