package rdma

import (
	"fmt"
	"strings"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// deviceFacts is what Open learned about one verbs device.
type deviceFacts struct {
	name  string
	err   error       // opening or querying it failed
	ports []portFacts // ports 1..phys_port_cnt
}

type portFacts struct {
	num    int
	active bool
	state  string // for messages: "active", "down", ...
}

// chooseDevice picks the device and port Open uses: the named device (or
// the first one with an active port) and the given port (or its first
// active one). Every way of finding nothing usable is ErrNotSupported,
// with the reason, so that callers fall back to TCP.
func chooseDevice(devs []deviceFacts, opts Options) (dev, port int, err error) {
	if len(devs) == 0 {
		return -1, 0, fmt.Errorf("rdma: no RDMA device: libibverbs lists no device (no RDMA NIC, or its kernel driver is not loaded): %w", verbs.ErrNotSupported)
	}
	var why []string
	for i, d := range devs {
		if opts.Device != "" && d.name != opts.Device {
			continue
		}
		if d.err != nil {
			why = append(why, fmt.Sprintf("%s: %v", d.name, d.err))
			continue
		}
		for _, p := range d.ports {
			if opts.Port != 0 && p.num != opts.Port {
				continue
			}
			if p.active {
				return i, p.num, nil
			}
			why = append(why, fmt.Sprintf("%s port %d %s", d.name, p.num, p.state))
		}
		if opts.Port != 0 && opts.Port > len(d.ports) {
			why = append(why, fmt.Sprintf("%s has no port %d", d.name, opts.Port))
		}
	}
	if opts.Device != "" && len(why) == 0 {
		names := make([]string, len(devs))
		for i, d := range devs {
			names[i] = d.name
		}
		return -1, 0, fmt.Errorf("rdma: no RDMA device named %q (found %s): %w", opts.Device, strings.Join(names, ", "), verbs.ErrNotSupported)
	}
	return -1, 0, fmt.Errorf("rdma: no RDMA device with an active port (%s): %w", strings.Join(why, "; "), verbs.ErrNotSupported)
}
