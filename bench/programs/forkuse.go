package programs

import (
	"encoding/json"
	"fmt"
	"strings"
)

// forkTrials is how many forks one fork figure makes.
const forkTrials = 50

// forkUse measures what a fork child's first use of an inherited
// connection costs (csrc/forkuse.c): a client connects, makes 100 round
// trips, forks, and the child times its first round trip on the
// connection and its second; then, with no connection open, it forks
// children that exit at once and waits for each. Figures: the process's
// first fork(), the median fork(), the child's first and second round
// trips, and the median fork, exit and wait, in us.
// Shimmed, the child goes on over the area its parent holds, with no
// switch to kernel TCP.
func (h *harness) forkUse(m mode) (map[string]float64, error) {
	prog, err := h.cprog("forkuse")
	if err != nil {
		return nil, err
	}
	res, rd, stop, err := h.serverClient(m, prog,
		func(port string) []string { return []string{"server", port} },
		func(port string) []string { return []string{"client", port, fmt.Sprint(forkTrials)} })
	if err != nil {
		return nil, err
	}
	defer stop()
	var r struct {
		First float64 `json:"fork_first_us"`
		Fork  float64 `json:"fork_us"`
		Use   float64 `json:"use_us"`
		Next  float64 `json:"next_us"`
		Cycle float64 `json:"cycle_us"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(res)), &r); err != nil || r.Use <= 0 || r.Cycle <= 0 {
		return nil, fmt.Errorf("forkuse client: %v %q", err, res)
	}
	return carried(m, rd, map[string]float64{
		"fork.first": r.First, "fork.us": r.Fork, "fork.use": r.Use, "fork.next": r.Next, "fork.cycle": r.Cycle,
	})
}
