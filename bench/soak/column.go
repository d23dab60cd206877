package soak

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sdpshim/sdpshim/bench/internal/freeport"
	"github.com/sdpshim/sdpshim/shim/stats"
)

// column is one column's run: kernel TCP or sdpshim.
type column struct {
	name        string
	shim        bool
	procs       int    // client processes run
	clients     report // their reports added up
	server      report
	procHangs   int // client processes killed at their limit
	procFails   int // client processes that failed otherwise
	fallbacks   int // connections the server's shim did not accelerate; -1 unknown
	accelerated int // connections the server's shim accelerated
	pulled      int // of them, deferred and pulled at their first use (a pre-fork server)
	reasons     []string
	start       usage // after the warm-up client
	end         usage // after the last client, settled
	most        usage
	curve       []point
	notes       []string
	err         error // the column could not run
}

// mismatches, hangs and errors count each problem once: a connection's
// problem is counted by the end that saw it (the other end may see a
// short stream or a reset as a result, counted too).
func (c *column) mismatches() uint64 { return c.clients.Mismatches + c.server.Mismatches }
func (c *column) hangs() uint64 {
	return c.clients.Hangs + c.server.Hangs + uint64(c.procHangs)
}
func (c *column) errors() uint64 { return c.clients.Errors + c.server.Errors + uint64(c.procFails) }

// clean says whether the column found no problem.
func (c *column) clean() bool {
	return c.err == nil && c.mismatches() == 0 && c.hangs() == 0 && c.errors() == 0 && c.fallbacks == 0
}

// column runs the soak in one column: the server, a warm-up client,
// then the clients for the duration while the server is sampled.
func (h *harness) column(name string, shim bool) *column {
	col := &column{name: name, shim: shim, fallbacks: -1}
	if !shim {
		col.fallbacks = 0
	}
	rd := ""
	if shim {
		// A private run directory: the shim makes rd, mode 0700, in a
		// fresh directory of ours.
		dir, err := os.MkdirTemp(h.tmp, "rd")
		if err != nil {
			col.err = err
			return col
		}
		rd = filepath.Join(dir, "run")
	}
	port, err := freeport.Loopback()
	if err != nil {
		col.err = err
		return col
	}
	env := h.environ(shim, rd)
	srv, err := startServer(h.prog, env, port, stall, h.prefork)
	if err != nil {
		col.err = err
		return col
	}
	defer srv.kill()
	defer func() { col.notes = append(col.notes, tagged("server", problems(srv.stderr()))...) }()
	pid := srv.pid()
	fmt.Fprintf(h.log, "soak: %s: server %d on port %d\n", name, pid, port)
	base := clientRun{prog: h.prog, environ: env, port: port, stall: stall, exitLimit: exitLimit}

	// The warm-up client: what the server sets up once (the shim's
	// core, its rendezvous) is in the start figures.
	warm := base
	warm.seed, warm.seconds, warm.conns, warm.parallel = seed, h.d.Seconds(), 2, 2
	col.fold(h.log, warm, runClient(warm))
	if col.start, err = settled(pid, usage{}); err != nil {
		col.err = err
		return col
	}
	smp := startSampler(pid, interval(h.d))
	t0 := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex // col's counts
	wg.Go(func() {
		long := base
		long.seed, long.seconds, long.parallel = seed<<32|1, h.d.Seconds(), longParallel
		o := runClient(long)
		mu.Lock()
		col.fold(h.log, long, o)
		mu.Unlock()
	})
	for lane := range shortLanes {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(lane)))
			for k := 0; ; k++ {
				left := h.d - time.Since(t0)
				if left <= 0 {
					return
				}
				short := base
				short.seed = seed<<32 | uint64(lane+2)<<24 | uint64(k)
				short.seconds, short.conns, short.parallel = left.Seconds(), 1+rng.IntN(shortConns), shortParallel
				o := runClient(short)
				mu.Lock()
				col.fold(h.log, short, o)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	col.curve = smp.end()
	if col.end, err = settled(pid, col.start); err != nil {
		col.err = err
		return col
	}
	col.most = col.start
	for _, p := range append(col.curve, point{usage: col.end}) {
		col.most.rssKB, col.most.fds = max(col.most.rssKB, p.rssKB), max(col.most.fds, p.fds)
	}
	if shim {
		col.readStats(rd, pid)
	}
	if col.server, err = srv.finish(); err != nil {
		col.err = err
	}
	if shim && col.fallbacks >= 0 {
		col.fallbacks = max(col.fallbacks, int(col.server.Conns)-col.accelerated)
	}
	return col
}

// outcome is a client process's end.
type outcome struct {
	rep    report
	stderr string
	err    error
}

// runClient runs r to its end.
func runClient(r clientRun) outcome {
	rep, stderr, err := r.run()
	return outcome{rep, stderr, err}
}

// fold adds a client process's outcome to the column.
func (c *column) fold(log io.Writer, r clientRun, o outcome) {
	c.procs++
	c.clients.add(o.rep)
	who := fmt.Sprintf("client %x", r.seed)
	switch {
	case errors.Is(o.err, errHung):
		c.procHangs++
		c.notes = append(c.notes, who+": "+o.err.Error())
	case o.err != nil:
		c.procFails++
		c.notes = append(c.notes, who+": "+o.err.Error())
	}
	c.notes = append(c.notes, tagged(who, problems(o.stderr))...)
	fmt.Fprintf(log, "soak: %s: %s: %d connections, %+v %v\n", c.name, who, o.rep.Conns, o.rep, o.err)
}

func tagged(who string, lines []string) []string {
	for i, l := range lines {
		lines[i] = who + ": " + l
	}
	return lines
}

// readStats reads the server's stats: the connections its shim
// accelerated and its fallbacks, by reason. fallbacks stays -1 when the
// stats cannot be read (a note says why).
func (c *column) readStats(rd string, pid int) {
	s, err := stats.Fetch(filepath.Join(rd, stats.SockName(pid)), 2*time.Second)
	if err != nil {
		c.notes = append(c.notes, fmt.Sprintf("server stats: %v", err))
		return
	}
	c.accelerated = int(s.Totals.Accelerated)
	c.pulled = int(s.Events["accept.pulled"])
	c.fallbacks = int(s.Totals.Fallbacks)
	for _, r := range s.Fallbacks {
		c.reasons = append(c.reasons, fmt.Sprintf("%s %d", r.Name, r.Count))
	}
}

// problems describes what the column found, for the error.
func (c *column) problems() string {
	var p []string
	for _, x := range []struct {
		n    int
		what string
	}{
		{int(c.mismatches()), "mismatches"}, {int(c.hangs()), "hangs"}, {int(c.errors()), "errors"}, {c.fallbacks, "fallbacks"},
	} {
		if x.n > 0 {
			p = append(p, fmt.Sprintf("%d %s", x.n, x.what))
		}
	}
	if c.fallbacks < 0 {
		p = append(p, "fallbacks unknown (no stats from the server)")
	}
	return strings.Join(p, ", ")
}
