package programs

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
)

// setupConns is how many connections one setup figure opens.
const setupConns = 1000

// setup measures what opening a connection costs (csrc/setup.c): one
// client opens setupConns connections one after another (connect, a
// 64-byte round trip, close) to a server with a listener of its own, then
// to a pre-fork one (two forked workers accept on the listener, so the
// shim defers its connections). Shimmed, every connection is accelerated
// (SDPSHIM_SHORT_CONN=0: the short-lived rule would keep them on kernel
// TCP). Figures: us per connection for each server, and the pre-fork
// one's over its own-listener one's.
func (h *harness) setup(m mode) (map[string]float64, error) {
	prog, err := h.cprog("setup")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, shape := range []string{"own", "prefork"} {
		us, err := h.setupRun(m, prog, shape)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", shape, err)
		}
		out["setup."+shape] = us
	}
	out["setup.deferred"] = out["setup.prefork"] / out["setup.own"]
	return out, nil
}

// setupRun runs one server shape and the client against it.
func (h *harness) setupRun(m mode, prog, shape string) (float64, error) {
	rd, port, err := h.pair()
	if err != nil {
		return 0, err
	}
	environ := append(h.env.of(m, rd), "SDPSHIM_SHORT_CONN=0")
	srv, err := startServer(environ, nil, prog, "server", shape, fmt.Sprint(port))
	if err != nil {
		return 0, err
	}
	defer srv.stop(syscall.SIGKILL)
	if err := srv.waitListen(port); err != nil {
		return 0, err
	}
	res, err := runClient(environ, nil, h.limit(), prog, "client", fmt.Sprint(port), fmt.Sprint(setupConns))
	if err != nil {
		return 0, err
	}
	var r struct {
		US float64 `json:"us_per_conn"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(res)), &r); err != nil || r.US <= 0 {
		return 0, fmt.Errorf("setup client: %v %q", err, res)
	}
	got, err := carried(m, rd, map[string]float64{"us": r.US})
	if err != nil {
		return 0, err
	}
	return got["us"], nil
}
