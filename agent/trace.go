package agent

import (
	"errors"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/sdpshim/sdpshim/probes"
	"github.com/sdpshim/sdpshim/shim/stats"
)

var (
	descTraceUp = prometheus.NewDesc("sdpshim_agent_trace_up",
		"1 when the eBPF trace runs; 0 with why it does not (not-permitted, load-failed, disabled).", []string{"reason"}, nil)
	descTraceFallbacks = prometheus.NewDesc("sdpshim_trace_fallback_events_total",
		"Fallbacks the probes saw in any process of the node since the agent started, by reason code.", []string{"code", "reason"}, nil)
	descTraceAccelerated = prometheus.NewDesc("sdpshim_trace_accelerated_events_total",
		"Accelerated connections the probes saw in any process of the node since the agent started, by transport.", []string{"transport"}, nil)
	descTraceLost = prometheus.NewDesc("sdpshim_trace_events_lost_total",
		"Probe events dropped because the ring buffer was full.", nil, nil)
	descTraceConns = prometheus.NewDesc("sdpshim_trace_connections",
		"Connections that moved payload through kernel TCP since the trace started (closed ones until the next scrape), by verdict (SILENT-FALLBACK: reported accelerated, yet on kernel TCP; candidate: local TCP where an end does not run the shim).", []string{"verdict"}, nil)
)

// Trace is the eBPF trace of `sdpshim trace` run as a service: it counts
// the probes' events and judges the kernel-TCP connections at every
// scrape. A Trace that could not load says why (Why) and exports only
// that. Its methods are safe for concurrent use.
type Trace struct {
	tr  *probes.Tracer // nil when not running
	why string         // reason label when not running
	log logrus.FieldLogger

	mu          sync.Mutex
	facts       probes.Facts // +checklocks:mu
	fallbacks   map[int]uint64
	accelerated map[string]uint64
	done        chan struct{}
}

var _ prometheus.Collector = (*Trace)(nil)

// StartTrace loads the probes with o and starts reading their events.
// It never fails: without the privileges, or when loading fails, the
// Trace runs without probes, logs why once and exports it.
func StartTrace(o probes.Options, log logrus.FieldLogger) *Trace {
	t := &Trace{log: log, fallbacks: map[int]uint64{}, accelerated: map[string]uint64{},
		facts: probes.Facts{Accelerated: map[uint64]bool{}, Fallbacks: map[uint64]int{}}}
	tr, err := probes.Load(o)
	switch {
	case errors.Is(err, probes.ErrNotPermitted):
		t.why = "not-permitted"
		log.WithError(err).Warn("agent: eBPF trace not running: the kernel refused the programs (needs CAP_BPF and CAP_PERFMON, or root); serving the rest")
		return t
	case err != nil:
		t.why = "load-failed"
		log.WithError(err).Warn("agent: eBPF trace not running: the programs could not be loaded; serving the rest")
		return t
	}
	t.tr, t.done = tr, make(chan struct{})
	go t.read()
	return t
}

// DisabledTrace is a Trace that was not asked to run.
func DisabledTrace() *Trace { return &Trace{why: "disabled"} }

// Why returns why the trace does not run, "" when it does.
func (t *Trace) Why() string { return t.why }

func (t *Trace) read() {
	defer close(t.done)
	for {
		ev, err := t.tr.ReadEvent()
		if err != nil {
			return // closed
		}
		t.mu.Lock()
		switch ev.Kind {
		case probes.EventFallback:
			t.fallbacks[ev.Code]++
			if ev.Cookie != 0 {
				t.facts.Fallbacks[ev.Cookie] = ev.Code
			}
		case probes.EventAccelerated:
			t.accelerated[stats.Transport(ev.Code).String()]++
			if ev.Cookie != 0 {
				t.facts.Accelerated[ev.Cookie] = true
				delete(t.facts.Fallbacks, ev.Cookie)
			}
		}
		t.mu.Unlock()
	}
}

// Learn records the accelerated connections of a process's snapshot, so
// that connections accelerated before the trace started are judged right.
func (t *Trace) Learn(s *stats.Snapshot) {
	if t.tr == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range s.Connections {
		if c.Cookie != 0 && (c.Transport == "shm" || c.Transport == "rdma") && !t.facts.Accelerated[c.Cookie] {
			t.facts.Accelerated[c.Cookie] = true
			t.tr.MarkAccelerated(c.Cookie, 0) // only presence matters
		}
	}
}

// Describe sends the trace's descriptors.
func (t *Trace) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTraceUp, descTraceFallbacks, descTraceAccelerated, descTraceLost, descTraceConns} {
		ch <- d
	}
}

// Collect sends the trace's state and counts, and judges the kernel-TCP
// connections the probes saw; closed ones are then forgotten.
func (t *Trace) Collect(ch chan<- prometheus.Metric) {
	if t.tr == nil {
		ch <- prometheus.MustNewConstMetric(descTraceUp, prometheus.GaugeValue, 0, t.why)
		return
	}
	ch <- prometheus.MustNewConstMetric(descTraceUp, prometheus.GaugeValue, 1, "")
	ch <- prometheus.MustNewConstMetric(descTraceLost, prometheus.CounterValue, float64(t.tr.EventsLost()))
	conns, err := t.tr.Conns()
	if err != nil {
		t.log.WithError(err).Warn("agent: read the trace's connections")
	}
	states, _ := t.tr.States()
	t.mu.Lock()
	for code, n := range t.fallbacks {
		ch <- prometheus.MustNewConstMetric(descTraceFallbacks, prometheus.CounterValue, float64(n), strconv.Itoa(code), stats.ReasonName(code))
	}
	for tr, n := range t.accelerated {
		ch <- prometheus.MustNewConstMetric(descTraceAccelerated, prometheus.CounterValue, float64(n), tr)
	}
	facts := t.facts
	shimmed := map[uint32]bool{}
	facts.Shimmed = func(pid uint32) bool {
		v, ok := shimmed[pid]
		if !ok {
			v = probes.ShimmedPID(pid)
			shimmed[pid] = v
		}
		return v
	}
	facts.IsLocal = probes.LocalAddrs()
	rows := probes.Classify(conns, states, facts)
	t.mu.Unlock()
	byVerdict := map[probes.Verdict]int{}
	for _, r := range rows {
		byVerdict[r.Verdict]++
		if r.State == probes.TCPClose {
			t.tr.Forget(r.PID, r.Cookie)
		}
	}
	for v := probes.VerdictRemote; v <= probes.VerdictSilentFallback; v++ {
		ch <- prometheus.MustNewConstMetric(descTraceConns, prometheus.GaugeValue, float64(byVerdict[v]), v.String())
	}
}

// Close detaches the probes and waits for the event reader to stop.
func (t *Trace) Close() error {
	if t.tr == nil {
		return nil
	}
	err := t.tr.Close()
	<-t.done
	return err
}
