package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/sdpshim/sdpshim/shim/stats"
)

// writeDetail prints one process's snapshot, section by section.
func writeDetail(w io.Writer, s *stats.Snapshot) {
	p, t := s.Process, s.Totals
	fmt.Fprintf(w, "process %d (%s), uid %d, stats for %s\n", p.PID, p.Comm, p.UID, s.Time.Sub(p.Started).Round(time.Second))
	fmt.Fprintf(w, "connections: %d open, %d opened, %d accelerated, %d fallbacks\n", t.ConnsOpen, t.ConnsOpened, t.Accelerated, t.Fallbacks)
	fmt.Fprintf(w, "sent %s in %d messages, received %s in %d messages, %d preemptions, %d pauses, %d CPU moves\n",
		bytesText(t.BytesSent), t.MessagesSent, bytesText(t.BytesReceived), t.MessagesReceived, s.Scheduler.Preemptions, s.Scheduler.Pauses,
		s.Scheduler.Moves)
	f := s.Flow
	fmt.Fprintf(w, "flow control: %d credit stalls, %s coalesced, %d async flushes, buffer utilisation %s\n",
		f.Stalls, bytesText(f.CoalescedBytes), f.AsyncFlushes, percent(f.Utilisation))

	section := func(header string, rows func(tw *tabwriter.Writer)) {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, header)
		rows(tw)
		tw.Flush()
	}
	if len(s.Connections) > 0 {
		section("CONN\tFD\tLOCAL\tPEER\tPEER-PID\tTRANSPORT\tREASON\tFLOW\tSENT\tRECEIVED\tMSGS-TX\tMSGS-RX\tSTALLS\tPREEMPT\tPAUSES\tMOVES\tSOCK-RINGS", func(tw *tabwriter.Writer) {
			for _, c := range s.Connections {
				stalls := "-"
				if c.FlowStats != nil {
					stalls = fmt.Sprint(c.FlowStats.Stalls)
				}
				fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%d\t%d\t%d\t%d\n", c.ID, c.FD, dash(c.Local), dash(c.Peer),
					dashInt(c.PeerPID), c.Transport, reasonText(c.Reason, c.ReasonName), dash(c.Flow),
					bytesText(c.BytesSent), bytesText(c.BytesReceived), c.MessagesSent, c.MessagesReceived, stalls, c.Preemptions, c.Pauses, c.Moves, c.SocketRings)
			}
		})
	}
	if len(s.Channels) > 0 {
		section("CHANNEL\tPEER-PID\tTRANSPORT\tBLOCKS\tIN-USE\tREAD-SYNCS\tRETAINED-SKIPS\tSENT\tRECEIVED", func(tw *tabwriter.Writer) {
			for _, c := range s.Channels {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%dx%d\t%d\t%d\t%d\t%d\t%d\n", c.ID, dashInt(c.PeerPID), c.Transport, c.Blocks, c.BlockSize,
					c.BlocksInUse, c.ReadSyncs, c.RetainedSkips, c.BlocksSent, c.BlocksReceived)
			}
		})
	}
	if len(s.Waiters) > 0 {
		section("WAITER\tWAITS\tPOLL-HITS\tPOLL-MISSES\tSLEEPS\tMODE-SWITCHES\tBUDGET", func(tw *tabwriter.Writer) {
			for _, x := range s.Waiters {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\n", x.Name, x.Waits, x.PollHits, x.PollMisses, x.Sleeps, x.ModeSwitches, budgetText(x.Budget))
			}
		})
	}
	if len(s.Fallbacks) > 0 {
		section("FALLBACK REASON\tCODE\tCOUNT", func(tw *tabwriter.Writer) {
			for _, r := range s.Fallbacks {
				fmt.Fprintf(tw, "%s\t%d\t%d\n", r.Name, r.Code, r.Count)
			}
		})
	}
	if len(s.RecentFallbacks) > 0 {
		section("RECENT FALLBACK\tREASON\tFD\tLOCAL\tPEER", func(tw *tabwriter.Writer) {
			for _, e := range s.RecentFallbacks {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", e.Time.Local().Format("15:04:05.000"), reasonText(e.Code, e.Name), e.FD, dash(e.Local), dash(e.Peer))
			}
		})
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func dashInt(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func reasonText(code int, name string) string {
	if code == 0 {
		return "-"
	}
	return fmt.Sprintf("%s(%d)", name, code)
}

func budgetText(b int64) string {
	switch b {
	case -1:
		return "busy"
	case 0:
		return "event"
	}
	return fmt.Sprint(b)
}
