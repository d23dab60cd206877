/*
 * log.c - the interposer's own log lines: why the core was not loaded, and
 * configuration problems it finds before the core can (SDPSHIM_ENABLE,
 * SDPSHIM_CORE). Everything else is logged by the core.
 *
 * Same knobs as the core (shim/config): SDPSHIM_LOG_LEVEL (off, the default,
 * panic, fatal, error, warn/warning, info, debug, trace) and SDPSHIM_LOG_FILE
 * (stderr or an absolute path, opened O_APPEND, created 0600). An unknown
 * value counts as off here; the core reports it when it loads. Lines are
 * written with raw system calls, one write(2) each.
 */
#include "shim.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

static int sdp_log_level = SDP_LOG_OFF;
static char sdp_log_file[4096]; /* "" = stderr */

/* Copies the value of name without surrounding blanks into buf; 0 when the
 * variable is unset or blank. */
static size_t sdp_env_trimmed(const char *name, char *buf, size_t cap)
{
	const char *v = getenv(name);
	if (v == NULL)
		return 0;
	while (*v == ' ' || *v == '\t')
		v++;
	size_t n = strlen(v);
	while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\n'))
		n--;
	if (n >= cap)
		n = cap - 1;
	memcpy(buf, v, n);
	buf[n] = 0;
	return n;
}

void sdp_log_setup(void)
{
	static const struct {
		const char *name;
		int level;
	} levels[] = {
		{"off", SDP_LOG_OFF},     {"panic", SDP_LOG_ERROR}, {"fatal", SDP_LOG_ERROR},
		{"error", SDP_LOG_ERROR}, {"warn", SDP_LOG_WARN},   {"warning", SDP_LOG_WARN},
		{"info", SDP_LOG_INFO},   {"debug", SDP_LOG_DEBUG}, {"trace", SDP_LOG_DEBUG},
	};
	char v[32];
	sdp_log_level = SDP_LOG_OFF;
	if (sdp_env_trimmed("SDPSHIM_LOG_LEVEL", v, sizeof v) > 0)
		for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
			if (strcasecmp(v, levels[i].name) == 0)
				sdp_log_level = levels[i].level;
	if (sdp_env_trimmed("SDPSHIM_LOG_FILE", sdp_log_file, sizeof sdp_log_file) == 0 ||
	    sdp_log_file[0] != '/')
		sdp_log_file[0] = 0;
}

static void sdp_log_write(int to_file, const char *level, const char *fmt, va_list ap)
{
	char line[1024];
	/* Reports (level NULL) read like the core's configuration errors. */
	int n = level == NULL ? snprintf(line, sizeof line, "sdpshim: ")
			      : snprintf(line, sizeof line, "sdpshim[%d]: %s", (int)getpid(), level);
	if (n < 0)
		return;
	int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
	if (m < 0)
		return;
	size_t len = (size_t)n + (size_t)m;
	if (len > sizeof line - 2)
		len = sizeof line - 2;
	line[len++] = '\n';
	int saved = errno;
	int fd = 2;
	if (to_file && sdp_log_file[0] != 0) {
		fd = (int)syscall(SYS_openat, AT_FDCWD, sdp_log_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (fd < 0)
			fd = 2;
	}
	(void)syscall(SYS_write, fd, line, len);
	if (fd != 2)
		(void)syscall(SYS_close, fd);
	errno = saved;
}

void sdp_log(int level, const char *fmt, ...)
{
	static const char *const names[] = {"", "error: ", "warn: ", "info: ", "debug: "};
	if (level > sdp_log_level || level <= SDP_LOG_OFF)
		return;
	va_list ap;
	va_start(ap, fmt);
	sdp_log_write(1, names[level], fmt, ap);
	va_end(ap);
}

void sdp_report(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	/* Through the log when it takes errors, else straight to stderr. */
	sdp_log_write(sdp_log_level >= SDP_LOG_ERROR, NULL, fmt, ap);
	va_end(ap);
}
