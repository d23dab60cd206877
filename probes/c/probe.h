/*
 * probe.h - sdpshim's probe points: exported no-op functions that eBPF
 * uprobes attach to (`sdpshim trace`). Compiled from probe.c into the Go
 * core library (libsdpshim-core.so: both) and the interposer
 * (libsdpshim.so: sdpshim_probe_fallback, for the fallbacks it decides
 * without the core); see docs/observability.md.
 *
 * Each function's first instruction is a 5-byte NOP on x86-64 (a 4-byte
 * NOP on arm64, the only size there) followed by a return, so calling one
 * costs a call and a return when nobody listens, and the kernel can turn
 * a uprobe on it into a jump instead of a trap. They are written in
 * assembly: no compiler can inline them, drop the call, or put a
 * prologue (endbr64, frame setup) before the NOP.
 *
 * The arguments are the ABI: a uprobe reads them from the argument
 * registers. Never reorder or retype them; add a new probe instead.
 */
#ifndef SDPSHIM_PROBE_H
#define SDPSHIM_PROBE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A connection stays on kernel TCP: reason is its code (docs/reasons.md,
 * 1..127), fd the program's socket, cookie its SO_COOKIE (0 if unknown). */
void sdpshim_probe_fallback(int reason, int fd, uint64_t cookie);

/* A connection is accelerated: transport is 1 (shm) or 2 (rdma), fd the
 * program's socket, cookie the SO_COOKIE of its TCP socket. `sdpshim
 * trace` flags the connection when kernel TCP still carries its bytes. */
void sdpshim_probe_accelerated(int transport, int fd, uint64_t cookie);

#ifdef __cplusplus
}
#endif

#endif /* SDPSHIM_PROBE_H */
