/*
 * probe.c - the core library's probe functions (probes/c/probe.c):
 * sdpshim_probe_fallback and sdpshim_probe_accelerated, exported by
 * exports.map and called from Go (probes.go) for every fallback and every
 * accelerated connection the core decides.
 */
#include "../../probes/c/probe.c"
