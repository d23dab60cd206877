// Package probes is the eBPF side of `sdpshim trace`: programs written in
// C (bpf/trace.c, compiled by bpf2go into the committed trace_*_bpfel.o
// files, so a build needs no clang), their loader (Load), and the probe
// functions the core library exports for them (c/probe.c, compiled into
// libsdpshim-core.so by preload/entry; not part of this Go package).
//
// A Tracer owns every kernel object it loads and attaches: programs, maps,
// links and the ring buffer reader. They live until Tracer.Close; losing
// the Tracer without closing it leaks them until the process exits.
//
// What is traced:
//
//   - uprobes on sdpshim_probe_fallback and sdpshim_probe_accelerated in
//     the core library, and on sdpshim_probe_fallback in the interposer
//     (Options.Interposer), in every process that maps them: one Event
//     each;
//   - tp_btf sock_send_length and sock_recv_length: kernel-TCP payload
//     bytes per (pid, socket cookie), split at the moment the connection
//     was reported accelerated (ConnBytes);
//   - tp_btf inet_sock_set_state: TCP state per socket cookie (SockState).
//
// Loading needs root (CAP_BPF and CAP_PERFMON); without it Load returns an
// error wrapping ErrNotPermitted. fentry and kprobes are not used.
package probes
