// Package seed003 measures PeRF's application types (docs/design.md,
// "Seed 003": Lee et al., preemption for RDMA; issue 13 item 4) over
// kernel TCP and under the sdpshim preload in the same run:
//
//   - D_App (16-byte ping-pong) alone and beside B_App (1 MiB writes);
//   - M_App (batches of 32 x 16 B, each answered) alone and beside B_App;
//   - B_App alone, the work-conserving case;
//   - a tenant of one bulk stream beside a tenant of sixteen, both
//     backlogged, and each one's share of the bytes moved.
//
// Each workload is one client process of csrc/tenants.c against one
// server process, so under SDPSHIM_CHANNEL=shared all its connections are
// streams of one channel. The shim runs in four modes: the shared
// channel with preemption on, the shared channel with SDPSHIM_PREEMPT=0,
// the default (direct) mode, where preemption gives the CPU to small
// messages, and the direct mode with SDPSHIM_PREEMPT=0. The figures are D_App's round-trip p50
// and p99, M_App's message rate, B_App's throughput and the tenants'
// shares, and the targets are judged on their ratios (figures.go).
// The paper's slides give no figure that this repository quotes, so no
// figure has a paper value.
//
// Run is the `sdpshim bench seed003` section.
package seed003
