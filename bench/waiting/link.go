package waiting

import (
	"fmt"
	"time"

	"github.com/sdpshim/sdpshim/core/mux"
	"github.com/sdpshim/sdpshim/core/shm"
	"github.com/sdpshim/sdpshim/core/statusbyte"
	"github.com/sdpshim/sdpshim/flowcontrol"
	"github.com/sdpshim/sdpshim/shim/config"
)

// setupTimeout bounds the channel setup between the two processes.
const setupTimeout = 10 * time.Second

// end is one process's side of the benchmark channel.
type end struct {
	prov   *shm.Provider
	tr     *statusbyte.Transport
	ch     *mux.Channel
	counts *waitCounts
}

// openEnd sets up this side's channel over the connected unix socket fd
// (which stays the caller's) with waits of mode: the shim's default
// transport sizes (SDPSHIM_BLOCKS, SDPSHIM_BLOCK_SIZE, SDPSHIM_CREDITS)
// and credit flow control, which sends every write at once (the shim's
// default, packed, relies on the shim's progress wrapper for that).
func openEnd(fd int, mode string) (*end, error) {
	cfg, err := config.Load(nil)
	if err != nil {
		return nil, fmt.Errorf("shim defaults: %w", err)
	}
	e := &end{counts: &waitCounts{}}
	newPolicy, err := e.counts.factory(mode)
	if err != nil {
		return nil, err
	}
	if e.prov, err = shm.Open(); err != nil {
		return nil, err
	}
	e.tr, err = statusbyte.Open(e.prov, fd, statusbyte.Config{Blocks: cfg.Blocks, BlockSize: cfg.BlockSize, Flow: flowcontrol.NameCredit}, time.Now().Add(setupTimeout))
	if err != nil {
		e.prov.Close()
		return nil, fmt.Errorf("status-byte transport: %w", err)
	}
	newFlow, err := flowcontrol.New(flowcontrol.NameCredit, flowcontrol.Params{
		Credits:         max(1, min(cfg.Credits, cfg.Blocks)),
		ReceiveCapacity: cfg.Blocks * e.tr.MaxPayload(),
		BlockPayload:    e.tr.MaxPayload(),
	})
	if err == nil {
		e.ch, err = mux.NewChannel(e.tr, mux.ChannelConfig{Initiator: e.tr.Initiator(), NewFlow: newFlow, NewPolicy: newPolicy})
	}
	if err != nil {
		e.tr.Close()
		e.prov.Close()
		return nil, err
	}
	return e, nil
}

// close ends the channel (and with it the transport) and the provider.
func (e *end) close() {
	e.ch.Close()
	e.prov.Close()
}

// sample is what one side counted over a measured part.
type sample struct {
	CPU      int64  // user+system ns of the process
	Waits    uint64 // finished waits of all its waiters
	Hits     uint64
	Sleeps   uint64
	Rings    uint64 // doorbell rings it posted to the peer
	Switches uint64 // adaptive mode switches
}

// snapshot reads the counters now; cpu is the process's CPU time.
func (e *end) snapshot(cpu int64, switches bool) sample {
	s := sample{
		CPU: cpu, Waits: e.counts.waits.Load(), Hits: e.counts.hits.Load(),
		Sleeps: e.counts.sleeps.Load(), Rings: e.tr.Stats().BellRings,
	}
	if switches {
		s.Switches = e.counts.modeSwitches()
	}
	return s
}

// since returns the counts from b to s.
func (s sample) since(b sample) sample {
	return sample{
		CPU: s.CPU - b.CPU, Waits: s.Waits - b.Waits, Hits: s.Hits - b.Hits,
		Sleeps: s.Sleeps - b.Sleeps, Rings: s.Rings - b.Rings, Switches: s.Switches - b.Switches,
	}
}

// add sums two sides.
func (s sample) add(o sample) sample {
	return sample{
		CPU: s.CPU + o.CPU, Waits: s.Waits + o.Waits, Hits: s.Hits + o.Hits,
		Sleeps: s.Sleeps + o.Sleeps, Rings: s.Rings + o.Rings, Switches: s.Switches + o.Switches,
	}
}
