package programs

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// passthrough measures one call (a one-byte pipe write or read) without
// and with the preload: ns per call.
func (h *harness) passthrough(m mode) (map[string]float64, error) {
	prog, err := h.cprog("pipecost")
	if err != nil {
		return nil, err
	}
	n := map[bool]string{false: "300000", true: "40000"}[h.quick]
	res, err := runClient(h.env.of(m, ""), nil, h.limit(), prog, n, "15")
	if err != nil {
		return nil, err
	}
	var r struct {
		NS float64 `json:"ns_per_call"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(res)), &r); err != nil {
		return nil, fmt.Errorf("pipecost: %v %q", err, res)
	}
	return map[string]float64{"pass.ns": r.NS}, nil
}

// startup measures /bin/true from start to exit (mean of a batch, best
// of 5 batches) and, under the shim, checks that a program making no
// socket never maps the Go core: a sleeping `sleep` has libsdpshim.so in
// its maps and not libsdpshim-core.so.
func (h *harness) startup(m mode) (map[string]float64, error) {
	environ := h.env.of(m, "")
	best := time.Duration(0)
	for b := 0; b < 5; b++ {
		t0 := time.Now()
		for i := 0; i < 20; i++ {
			c := exec.Command("/bin/true")
			c.Env = environ
			if err := c.Run(); err != nil {
				return nil, err
			}
		}
		if d := time.Since(t0) / 20; best == 0 || d < best {
			best = d
		}
	}
	out := map[string]float64{"start.us": float64(best) / 1e3}
	if m == shimmed {
		c := exec.Command("sleep", "5")
		c.Env = environ
		if err := c.Start(); err != nil {
			return out, err
		}
		defer func() { c.Process.Kill(); c.Wait() }()
		var maps []byte
		for i := 0; i < 100; i++ {
			time.Sleep(10 * time.Millisecond)
			maps, _ = os.ReadFile(fmt.Sprintf("/proc/%d/maps", c.Process.Pid))
			if strings.Contains(string(maps), "libsdpshim.so") {
				break
			}
		}
		switch {
		case !strings.Contains(string(maps), "libsdpshim.so"):
			return out, fmt.Errorf("sleep under the preload does not map libsdpshim.so")
		case strings.Contains(string(maps), "libsdpshim-core.so"):
			out["start.core"] = 1
		default:
			out["start.core"] = 0
		}
	}
	return out, nil
}
