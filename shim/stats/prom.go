package stats

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// WriteProm writes the snapshots in the Prometheus text exposition format
// (version 0.0.4): every family once, with HELP and TYPE, its samples from
// all snapshots together, each labelled with the process's pid and comm.
func WriteProm(w io.Writer, snaps []*Snapshot) error {
	var fams families
	for _, s := range snaps {
		fams.add(s)
	}
	bw := bufio.NewWriter(w)
	for _, f := range fams.list {
		if len(f.samples) == 0 {
			continue
		}
		bw.WriteString("# HELP " + f.name + " " + escapeHelp(f.help) + "\n")
		bw.WriteString("# TYPE " + f.name + " " + f.typ + "\n")
		for _, sm := range f.samples {
			bw.WriteString(f.name)
			if len(sm.labels) > 0 {
				bw.WriteByte('{')
				for i, l := range sm.labels {
					if i > 0 {
						bw.WriteByte(',')
					}
					bw.WriteString(l[0] + `="` + escapeLabel(l[1]) + `"`)
				}
				bw.WriteByte('}')
			}
			bw.WriteString(" " + sm.value + "\n")
		}
	}
	return bw.Flush()
}

type sample struct {
	labels [][2]string
	value  string
}

type family struct {
	name, help, typ string
	samples         []sample
}

// families keeps families in first-use order.
type families struct {
	list  []*family
	index map[string]*family
}

func (fs *families) emit(name, typ, help string, labels [][2]string, value string) {
	if fs.index == nil {
		fs.index = map[string]*family{}
	}
	f := fs.index[name]
	if f == nil {
		f = &family{name: name, help: help, typ: typ}
		fs.index[name] = f
		fs.list = append(fs.list, f)
	}
	f.samples = append(f.samples, sample{labels, value})
}

func u(v uint64) string  { return strconv.FormatUint(v, 10) }
func f(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// with returns base followed by more, in a new slice.
func with(base [][2]string, more ...string) [][2]string {
	out := make([][2]string, len(base), len(base)+len(more)/2)
	copy(out, base)
	for i := 0; i+1 < len(more); i += 2 {
		out = append(out, [2]string{more[i], more[i+1]})
	}
	return out
}

func (fs *families) add(s *Snapshot) {
	p := [][2]string{{"pid", strconv.Itoa(s.Process.PID)}, {"comm", s.Process.Comm}}
	c, g := "counter", "gauge"
	t := s.Totals
	fs.emit("sdpshim_process_start_time_seconds", g, "When the process's stats registry started, seconds since the epoch.", p, f(float64(s.Process.Started.UnixNano())/1e9))
	fs.emit("sdpshim_connections_open", g, "Connections registered now.", p, u(t.ConnsOpen))
	fs.emit("sdpshim_connections_opened_total", c, "Connections registered since start.", p, u(t.ConnsOpened))
	fs.emit("sdpshim_connections_accelerated_total", c, "Connections opened on shared memory or RDMA.", p, u(t.Accelerated))
	for _, d := range [...]struct {
		dir        string
		bytes, msg uint64
	}{{"sent", t.BytesSent, t.MessagesSent}, {"received", t.BytesReceived, t.MessagesReceived}} {
		fs.emit("sdpshim_bytes_total", c, "Payload bytes moved by accelerated connections, by direction.", with(p, "direction", d.dir), u(d.bytes))
		fs.emit("sdpshim_messages_total", c, "Send or receive calls of accelerated connections, by direction.", with(p, "direction", d.dir), u(d.msg))
	}
	for _, r := range s.Fallbacks {
		fs.emit("sdpshim_fallbacks_total", c, "Connections left on kernel TCP, by reason code (docs/reasons.md).", with(p, "code", strconv.Itoa(r.Code), "reason", r.Name), u(r.Count))
	}
	for _, cs := range s.Connections {
		l := with(p, "conn", u(cs.ID), "fd", strconv.Itoa(cs.FD), "peer", cs.Peer, "transport", cs.Transport, "reason", cs.ReasonName, "flow", cs.Flow)
		fs.emit("sdpshim_connection_bytes_total", c, "Payload bytes of one open connection, by direction.", with(l, "direction", "sent"), u(cs.BytesSent))
		fs.emit("sdpshim_connection_bytes_total", c, "", with(l, "direction", "received"), u(cs.BytesReceived))
		fs.emit("sdpshim_connection_messages_total", c, "Send or receive calls of one open connection, by direction.", with(l, "direction", "sent"), u(cs.MessagesSent))
		fs.emit("sdpshim_connection_messages_total", c, "", with(l, "direction", "received"), u(cs.MessagesReceived))
	}
	for _, ch := range s.Channels {
		l := with(p, "channel", u(ch.ID), "transport", ch.Transport)
		fs.emit("sdpshim_channel_blocks", g, "Blocks per direction of a channel.", l, strconv.Itoa(ch.Blocks))
		fs.emit("sdpshim_channel_blocks_in_use", g, "Send-side blocks of a channel not yet released by the peer.", l, u(ch.BlocksInUse))
		fs.emit("sdpshim_channel_read_syncs_total", c, "READs of the peer's status array.", l, u(ch.ReadSyncs))
		fs.emit("sdpshim_channel_retained_skips_total", c, "Block slots passed over because the peer retains them.", l, u(ch.RetainedSkips))
	}
	fl := s.Flow
	fs.emit("sdpshim_flow_credit_stalls_total", c, "Times a stream with bytes queued waited for credit or window.", p, u(fl.Stalls))
	fs.emit("sdpshim_flow_coalesced_bytes_total", c, "Payload bytes sent in a block behind an earlier write's bytes.", p, u(fl.CoalescedBytes))
	fs.emit("sdpshim_flow_async_flushes_total", c, "Stalls ended by the progress goroutine flushing held bytes.", p, u(fl.AsyncFlushes))
	fs.emit("sdpshim_flow_buffer_utilisation", g, "Payload bytes over block capacity of the blocks sent (0 to 1).", p, f(fl.Utilisation))
	for _, w := range s.Waiters {
		l := with(p, "waiter", w.Name)
		fs.emit("sdpshim_waiter_poll_hits_total", c, "Waits that ended ready without sleeping.", l, u(w.PollHits))
		fs.emit("sdpshim_waiter_poll_misses_total", c, "Waits that slept or gave up.", l, u(w.PollMisses))
		fs.emit("sdpshim_waiter_mode_switches_total", c, "Policy changes between polling and event mode.", l, u(w.ModeSwitches))
		fs.emit("sdpshim_waiter_budget", g, "Poll budget of the latest wait (-1 busy polling, 0 event mode).", l, strconv.FormatInt(w.Budget, 10))
	}
	fs.emit("sdpshim_scheduler_preemptions_total", c, "Scheduling points taken inside large writes.", p, u(s.Scheduler.Preemptions))
	fs.emit("sdpshim_scheduler_pauses_total", c, "Streams held back for their share of a shared channel, and large writes on direct connections that paused for small messages that lost the CPU or waited for a turn among the bulk senders of the user's processes.", p, u(s.Scheduler.Pauses))
	fs.emit("sdpshim_scheduler_cpu_moves_total", c, "Waits on direct connections that moved their thread off the peer's CPU.", p, u(s.Scheduler.Moves))
	fs.emit("sdpshim_stats_clients_refused_total", c, "Stats socket clients refused by SO_PEERCRED.", p, u(s.Server.Refused))
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }
func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
