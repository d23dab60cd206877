package agent

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Health is the agent's state as /healthz reports it: healthy while the
// latest check of the run directory (the periodic sweep) succeeded.
// Safe for concurrent use.
type Health struct {
	mu  sync.Mutex
	err error
}

// Set records the result of the latest check; nil is healthy.
func (h *Health) Set(err error) {
	h.mu.Lock()
	h.err = err
	h.mu.Unlock()
}

// Err returns the latest check's error, nil when healthy.
func (h *Health) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Handler serves /metrics (what reg gathers, in the exposition format
// the scraper negotiates; a collector's error fails only its series) and
// /healthz (200 "ok", or 503 and the error).
func Handler(reg *prometheus.Registry, h *Health) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := h.Err(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "unhealthy: %v\n", err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}
