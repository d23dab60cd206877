// Package agent is the node agent's machinery (`sdpshim agent`, the
// process a Kubernetes DaemonSet runs on every node): a Prometheus
// collector that reads every shimmed process's stats socket in the run
// directory at scrape time and labels its series by pod (Collector,
// PodUID), the eBPF trace run as a service (Trace), and the HTTP handler
// that serves both with a health check (Handler).
//
// Ownership: the agent's command owns the run directory's preparation
// and sweeping (core/rendezvous: PrepareRunDir, Sweep) and hands the
// results to Health; a Trace owns its probes.Tracer until Close. Nothing
// here runs inside a shimmed process: only the CLI imports it.
package agent
