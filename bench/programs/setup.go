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
	res, rd, stop, err := h.serverClient(m, prog,
		func(port string) []string { return []string{"server", shape, port} },
		func(port string) []string { return []string{"client", port, fmt.Sprint(setupConns)} })
	if err != nil {
		return 0, err
	}
	defer stop()
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

// serverClient runs one of the C programs as a server and as a client
// against it (their arguments, given the port), with every
// connection accelerated when shimmed (SDPSHIM_SHORT_CONN=0: the
// short-lived rule would keep the later ones on kernel TCP); it returns
// the client's output, the run directory, and what stops the server
// (after its statistics were read: carried).
func (h *harness) serverClient(m mode, prog string, server, client func(port string) []string) (string, string, func(), error) {
	rd, port, err := h.pair()
	if err != nil {
		return "", "", nil, err
	}
	environ := append(h.env.of(m, rd), "SDPSHIM_SHORT_CONN=0")
	srv, err := startServer(environ, nil, prog, server(fmt.Sprint(port))...)
	if err != nil {
		return "", "", nil, err
	}
	stop := func() { srv.stop(syscall.SIGKILL) }
	if err := srv.waitListen(port); err != nil {
		stop()
		return "", "", nil, err
	}
	res, err := runClient(environ, nil, h.limit(), prog, client(fmt.Sprint(port))...)
	if err != nil {
		stop()
		return "", "", nil, err
	}
	return res, rd, stop, nil
}
