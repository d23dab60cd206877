/*
 * probe.c - the probe functions of probe.h. Include this file in exactly
 * one C file of a library and export the names from its version script:
 * the core library (preload/entry/probe.c, exports.map) and the
 * interposer (preload/c/probe.c, libsdpshim.map: sdpshim_probe_fallback
 * for its own codes, 64 and up, when the core is not running).
 *
 * The symbols are protected: exported, but calls from inside the library
 * bind to its own copy, so the core never calls the interposer's probe
 * (loaded first, it would win the global lookup) and each library's
 * probe reports that library's events.
 */
#include "probe.h"

#if defined(__x86_64__)
/* nopl 0x0(%rax,%rax,1): one 5-byte instruction. */
#define SDPSHIM_PROBE_BODY ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n\tret\n"
#elif defined(__aarch64__)
#define SDPSHIM_PROBE_BODY "nop\n\tret\n"
#else
#error "sdpshim probes: unsupported architecture (x86-64 and arm64 only)"
#endif

#define SDPSHIM_PROBE(name)                                   \
	__asm__(".pushsection .text." #name ",\"ax\",%progbits\n" \
		".globl " #name "\n"                                  \
		".protected " #name "\n"                              \
		".type " #name ", %function\n"                        \
		".p2align 4\n" #name ":\n\t" SDPSHIM_PROBE_BODY       \
		".size " #name ", . - " #name "\n"                    \
		".popsection\n")

SDPSHIM_PROBE(sdpshim_probe_fallback);
SDPSHIM_PROBE(sdpshim_probe_accelerated);
