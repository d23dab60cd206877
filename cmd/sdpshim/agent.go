package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/signal"
	"os/user"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/sirupsen/logrus"

	"github.com/sdpshim/sdpshim/agent"
	"github.com/sdpshim/sdpshim/core/rendezvous"
	"github.com/sdpshim/sdpshim/probes"
	"github.com/sdpshim/sdpshim/shim/stats"
)

func init() {
	register(&Command{
		Name:    "agent",
		Summary: "the node agent: prepares and sweeps the run directory, serves /metrics and /healthz, runs the eBPF trace",
		Usage:   "sdpshim agent [--rundir DIR] [--group GID] [--listen ADDR] [--sweep D] [--trace=false] [--lib PATH]",
		Help: `The process a Kubernetes DaemonSet runs on every node (docs/kubernetes.md).

It prepares the run directory: shared with group GID (owned by the agent's
uid, mode 3770: pods whose supplementary groups include GID may use it,
docs/containers.md), or private (0700) without --group. Every --sweep it
removes what dead processes left there (entries, records, sockets of any
uid and pid namespace); /healthz answers 503 while that fails.

It serves, on --listen, /metrics in the Prometheus exposition format: the
counters of every shimmed process serving stats in the directory, read at
each scrape and labelled by pid, comm and pod_uid (from the process's
cgroup; run the agent with the host's pid namespace to see it), plus the
agent's own; and /healthz.

Where it may (root, or CAP_BPF and CAP_PERFMON), it runs the eBPF trace of
'sdpshim trace' as a service: fallback and acceleration events of every
process and kernel-TCP connections by verdict. Where it may not, it logs
why, exports sdpshim_agent_trace_up 0 with the reason and serves the rest.

  --rundir DIR  the run directory (default: SDPSHIM_RUNDIR, or its default)
  --group GID   share the run directory with this group (number or name)
  --listen ADDR the HTTP address (default :9464)
  --sweep D     time between sweeps (default 30s)
  --trace       run the eBPF trace (default true)
  --lib PATH    the core library to probe (default: SDPSHIM_CORE, else
                libsdpshim-core.so beside this executable)

Exit status: 0 after SIGTERM or SIGINT, 1 when the run directory cannot
be prepared or the address cannot be bound.`,
		Run: runAgent,
	})
}

// runAgent implements `sdpshim agent`.
func runAgent(env *Env, args []string) int {
	cmd := commands["agent"]
	fs := cmd.flags(env)
	rundir := fs.String("rundir", "", "run directory")
	group := fs.String("group", "", "share the run directory with this group")
	listen := fs.String("listen", ":9464", "HTTP address")
	sweepEvery := fs.Duration("sweep", 30*time.Second, "time between sweeps")
	trace := fs.Bool("trace", true, "run the eBPF trace")
	lib := fs.String("lib", "", "core library to probe")
	if code, done := parse(fs, args); done {
		return code
	}
	if fs.NArg() > 0 || *sweepEvery <= 0 {
		fmt.Fprintln(env.Stderr, "sdpshim agent: no arguments expected, and --sweep must be positive")
		cmd.printUsage(env.Stderr)
		return exitUsage
	}
	log := logrus.New()
	log.SetOutput(env.Stderr)
	gid, err := groupID(*group)
	if err != nil {
		fmt.Fprintf(env.Stderr, "sdpshim agent: %v\n", err)
		return exitUsage
	}
	dir := runDir(env, *rundir)
	if err := rendezvous.PrepareRunDir(dir, gid); err != nil {
		log.WithError(err).Error("agent: cannot prepare the run directory")
		return exitFailure
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.WithError(err).Error("agent: cannot listen")
		return exitFailure
	}

	tr := agent.DisabledTrace()
	if *trace {
		libPath, warning := coreLibrary(env, *lib)
		if warning != "" {
			log.Warn("agent: trace: " + warning + "; fallback events are not traced")
		}
		tr = agent.StartTrace(probes.Options{Library: libPath, Interposer: interposerLibrary(libPath)}, log)
	}
	defer tr.Close()
	swept := prometheus.NewCounter(prometheus.CounterOpts{Name: "sdpshim_agent_swept_files_total",
		Help: "Files of dead processes the agent removed from the run directory."})
	reg := prometheus.NewRegistry()
	reg.MustRegister(&agent.Collector{RunDir: dir, Timeout: fetchTimeout, Learn: tr.Learn, Log: log}, tr, swept,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	health := &agent.Health{}
	sweep := func() {
		n, err := rendezvous.Sweep(dir)
		n += uint64(stats.SweepStale(dir))
		swept.Add(float64(n))
		if err != nil {
			log.WithError(err).Warn("agent: sweep")
		}
		health.Set(err)
	}
	sweep()

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	srv := &http.Server{Handler: agent.Handler(reg, health), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.WithFields(logrus.Fields{"rundir": dir, "address": ln.Addr().String(), "trace": traceState(tr)}).Info("agent: serving /metrics and /healthz")
	tick := time.NewTicker(*sweepEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			sweep()
		case err := <-served:
			log.WithError(err).Error("agent: HTTP server stopped")
			return exitFailure
		case <-ctx.Done():
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer scancel()
			if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.WithError(err).Warn("agent: shutdown")
			}
			log.Info("agent: stopped")
			return exitOK
		}
	}
}

// groupID resolves --group: a number or a group name; -1 when empty.
func groupID(s string) (int, error) {
	if s == "" {
		return -1, nil
	}
	if gid, err := strconv.Atoi(s); err == nil && gid >= 0 {
		return gid, nil
	}
	g, err := user.LookupGroup(s)
	if err != nil {
		return 0, fmt.Errorf("--group %q: %w", s, err)
	}
	return strconv.Atoi(g.Gid)
}

func traceState(t *agent.Trace) string {
	if why := t.Why(); why != "" {
		return "off (" + why + ")"
	}
	return "running"
}
