/*
 * probe.c - the interposer's probe function and its own fallback reports.
 *
 * The interposer decides some fallbacks itself, before or without the
 * core (codes 64 and up, plus fork-exec-decline and disabled-by-setting:
 * enum sdpshim_reason). Each one is counted in sdp_fallback[] (which the
 * core's stats read through host->fallback when it runs) and fired through
 * sdpshim_probe_fallback, the same probe the core exports (probes/c), so
 * `sdpshim trace` sees fallbacks of processes that never loaded the core.
 */
#include "shim.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../probes/c/probe.c"

#ifndef SO_COOKIE
#define SO_COOKIE 57
#endif

void sdp_fallback_note(int reason, int fd)
{
	sdp_fallback_count(reason);
	uint64_t cookie = 0;
	if (fd >= 0) {
		int saved = errno;
		socklen_t n = sizeof cookie;
		if (syscall(SYS_getsockopt, fd, SOL_SOCKET, SO_COOKIE, &cookie, &n) != 0)
			cookie = 0;
		errno = saved;
	}
	sdpshim_probe_fallback(reason, fd, cookie);
}
