/*
 * core.c - loading the Go core (libsdpshim-core.so) and living without it.
 *
 * The core is loaded on the first TCP socket of the process, by the thread
 * that creates it, and never:
 *   - when SDPSHIM_ENABLE is 0/false/no/off (a bad value is reported once
 *     and also keeps it off);
 *   - in an AT_SECURE process (setuid, setgid, file capabilities);
 *   - when a Go runtime is already in the process (sdp_go_host);
 *   - in a vfork child, or a fork child of a process whose core was loading
 *     or running (the old runtime hangs there).
 * It comes from SDPSHIM_CORE (an absolute path; ignored in AT_SECURE
 * processes) or else from libsdpshim-core.so in the directory of
 * libsdpshim.so itself (dladdr in the constructor, before the program can
 * chdir; symlinks resolved at load time). dlopen(RTLD_NOW|RTLD_LOCAL), then every
 * entry point with dlsym, then sdpshim_core_init(). Whatever fails, the
 * process stays on kernel TCP for good, with the reason kept in
 * sdp_core_reason and one count per TCP socket in sdp_fallback[]. A core
 * that was dlopen()ed is never dlclose()d: a Go runtime cannot be unloaded.
 */
#include "shim.h"
#include "../../probes/c/probe.h"

#include <dlfcn.h>
#include <elf.h>
#include <limits.h>
#include <link.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

struct sdp_core sdp_core;
int sdp_core_state;
static int sdp_core_reason;
static uint64_t sdp_fallback[SDPSHIM_REASON_MAX];
static char sdp_self_path[PATH_MAX];
static char sdp_core_path[PATH_MAX];
static int sdp_core_path_chosen; /* sdp_core_path came from SDPSHIM_CORE */

/* How long a thread creating a TCP socket waits for another thread that is
 * loading the core before the socket stays on kernel TCP. */
#define SDP_CORE_LOAD_WAIT_NS (2 * 1000000000LL)

void sdp_fallback_count(int reason)
{
	if (reason > 0 && reason < SDPSHIM_REASON_MAX)
		__atomic_add_fetch(&sdp_fallback[reason], 1, __ATOMIC_RELAXED);
}

int sdp_core_off_reason(void) { return __atomic_load_n(&sdp_core_reason, __ATOMIC_ACQUIRE); }

int64_t sdp_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- the host side of the ABI ----------------------------------------------- */

static int host_fd_state(int fd) { return sdp_fd_state(fd); }
static int host_fd_set_state(int fd, int state) { return sdp_fd_set(fd, state); }
static void host_guard_enter(void) { sdp_guard_enter(); }
static void host_guard_leave(void) { sdp_guard_leave(); }

static struct sdpshim_host sdp_host = {
	.abi = SDPSHIM_CORE_ABI,
	.size = sizeof(struct sdpshim_host),
	.fd_state = host_fd_state,
	.fd_set_state = host_fd_set_state,
	.guard_enter = host_guard_enter,
	.guard_leave = host_guard_leave,
	.fallback_count = sdp_fallback_count,
	.fallback = sdp_fallback,
	.shim_path = sdp_self_path,
	.core_path = sdp_core_path,
};

/* ---- where we are, where the core is ------------------------------------------ */

/* The constructor records our path while the working directory is still
 * the one LD_PRELOAD was written for: a relative path is made absolute now
 * (realpath), an absolute one costs no system call until the core loads. */
void sdp_core_note_self(void)
{
	Dl_info info;
	char abs[PATH_MAX];
	if (sdp_self_path[0] != 0 || dladdr((void *)sdp_core_note_self, &info) == 0 || info.dli_fname == NULL)
		return;
	const char *p = info.dli_fname;
	if (p[0] != '/' && realpath(p, abs) != NULL)
		p = abs;
	size_t n = strlen(p);
	if (n < sizeof sdp_self_path)
		memcpy(sdp_self_path, p, n + 1);
}

/* At load time: symlinks resolved, so that the default core is the one
 * beside the real file. */
static void sdp_core_resolve_self(void)
{
	char abs[PATH_MAX];
	sdp_core_note_self();
	if (sdp_self_path[0] != 0 && realpath(sdp_self_path, abs) != NULL && strlen(abs) < sizeof sdp_self_path)
		memcpy(sdp_self_path, abs, strlen(abs) + 1);
}

/* Fills sdp_core_path; 0, or a reason. */
static int sdp_core_locate(void)
{
	const char *env = secure_getenv("SDPSHIM_CORE");
	if (env != NULL) {
		while (*env == ' ' || *env == '\t')
			env++;
		size_t n = strlen(env);
		while (n > 0 && (env[n - 1] == ' ' || env[n - 1] == '\t'))
			n--;
		if (n > 0) {
			if (env[0] != '/' || n >= sizeof sdp_core_path) {
				sdp_report("SDPSHIM_CORE=\"%.*s\": expected an absolute path to libsdpshim-core.so; "
					   "the shim is disabled, the program runs on plain TCP",
					   (int)(n > 64 ? 64 : n), env);
				return SDPSHIM_REASON_BAD_SETTING;
			}
			memcpy(sdp_core_path, env, n);
			sdp_core_path[n] = 0;
			sdp_core_path_chosen = 1;
			return 0;
		}
	}
	const char *slash = strrchr(sdp_self_path, '/');
	size_t dir = slash ? (size_t)(slash - sdp_self_path) + 1 : 0;
	static const char name[] = "libsdpshim-core.so";
	if (dir + sizeof name > sizeof sdp_core_path)
		return SDPSHIM_REASON_CORE_MISSING;
	memcpy(sdp_core_path, sdp_self_path, dir);
	memcpy(sdp_core_path + dir, name, sizeof name);
	return 0;
}

/* ---- is a Go runtime already here? ---------------------------------------------- */

/* Every Go-linked ELF object (executable, -buildmode=c-shared or plugin)
 * carries a note named "Go" of type 4 (the Go build ID) in a PT_NOTE
 * segment, so it is in memory: walk the notes of every loaded object. A
 * binary linked with an empty build ID has no note; one linked with cgo
 * (the only kind that honours LD_PRELOAD: a pure-Go binary is static) still
 * exports crosscall2 and _cgo_topofstack to the dynamic symbol table. */
#define SDP_GO_NOTE_BUILDID 4

static int sdp_phdr_has_go_note(struct dl_phdr_info *info, size_t size, void *found)
{
	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		size_t align = ph->p_align == 8 ? 8 : 4;
		const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
		const unsigned char *end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
			const unsigned char *name = p + sizeof *nh;
			size_t namesz = (nh->n_namesz + align - 1) & ~(align - 1);
			size_t descsz = (nh->n_descsz + align - 1) & ~(align - 1);
			if (nh->n_type == SDP_GO_NOTE_BUILDID && (nh->n_namesz == 3 || nh->n_namesz == 4) &&
			    name + 3 <= end && memcmp(name, "Go\0", 3) == 0) {
				*(int *)found = 1;
				return 1;
			}
			if ((size_t)(end - name) < namesz + descsz)
				break;
			p = name + namesz + descsz;
		}
	}
	return 0;
}

static int sdp_go_host(void)
{
	int found = 0;
	dl_iterate_phdr(sdp_phdr_has_go_note, &found);
	return found || dlsym(RTLD_DEFAULT, "crosscall2") != NULL || dlsym(RTLD_DEFAULT, "_cgo_topofstack") != NULL;
}

/* ---- loading ---------------------------------------------------------------------- */

/* SDPSHIM_ENABLE, parsed as shim/config does: 1/0, true/false, yes/no, on/off
 * in any case, blanks trimmed, unset or blank = 1. 0 to load, else a reason. */
static int sdp_core_enabled(void)
{
	static const char *const on[] = {"1", "true", "yes", "on"};
	static const char *const off[] = {"0", "false", "no", "off"};
	const char *v = getenv("SDPSHIM_ENABLE");
	if (v == NULL)
		return 0;
	while (*v == ' ' || *v == '\t')
		v++;
	size_t n = strlen(v);
	while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	if (n == 0)
		return 0;
	for (int i = 0; i < 4; i++) {
		if (strlen(on[i]) == n && strncasecmp(v, on[i], n) == 0)
			return 0;
		if (strlen(off[i]) == n && strncasecmp(v, off[i], n) == 0)
			return SDPSHIM_REASON_SHIM_OFF;
	}
	sdp_report("SDPSHIM_ENABLE=\"%.*s\": expected 1 or 0 (also true/false, yes/no, on/off); "
		   "the shim is disabled, the program runs on plain TCP",
		   (int)(n > 64 ? 64 : n), v);
	return SDPSHIM_REASON_BAD_SETTING;
}

/* One attempt, by the thread that won the LOADING state; 0 or a reason. */
static int sdp_core_try_load(void)
{
	extern char **environ;
	int reason;
	sdp_core_resolve_self();
	sdp_log_setup();
	if ((reason = sdp_core_enabled()) != 0) {
		sdp_log(SDP_LOG_INFO, "core not loaded: SDPSHIM_ENABLE turns the shim off");
		return reason;
	}
	if (getauxval(AT_SECURE)) {
		sdp_log(SDP_LOG_INFO, "core not loaded: secure-execution process (setuid, setgid or capabilities)");
		return SDPSHIM_REASON_SECURE_EXEC;
	}
	if (sdp_go_host()) {
		sdp_log(SDP_LOG_INFO, "core not loaded: a Go runtime is already in this process");
		return SDPSHIM_REASON_GO_HOST;
	}
	if ((reason = sdp_core_locate()) != 0)
		return reason;
	/* The Go runtime's threads start with the mask of the thread that
	 * loads it: with the program's signals held, a process-directed signal
	 * (SIGTERM, SIGINT, ...) always goes to one of the program's threads,
	 * interrupting its blocking call there, never to a runtime thread. */
	sigset_t held;
	sdp_signals_hold(&held);
	void *h = dlopen(sdp_core_path, RTLD_NOW | RTLD_LOCAL);
	sdp_signals_release(&held);
	if (h == NULL) {
		const char *err = dlerror();
		/* A path the user chose is a configuration problem; the default
		 * one missing is an installation matter, logged at warn level. */
		if (sdp_core_path_chosen)
			sdp_report("SDPSHIM_CORE=\"%.64s\": cannot load it (%s); the shim is disabled, the program "
				   "runs on plain TCP",
				   sdp_core_path, err ? err : "?");
		else
			sdp_log(SDP_LOG_WARN, "core not loaded: %s; connections stay on kernel TCP", err ? err : "?");
		return SDPSHIM_REASON_CORE_MISSING;
	}
	struct sdp_core c;
#define SDP_CORE_LOOKUP_(ret, name, params)                                                       \
	c.name = (sdpshim_core_##name##_fn *)dlsym(h, "sdpshim_core_" #name);                  \
	if (c.name == NULL) {                                                                      \
		sdp_log(SDP_LOG_WARN, "core %s lacks sdpshim_core_" #name "; connections stay on kernel TCP", \
			sdp_core_path);                                                            \
		return SDPSHIM_REASON_CORE_INCOMPLETE;                                                 \
	}
	SDPSHIM_CORE_ENTRY_POINTS(SDP_CORE_LOOKUP_)
#undef SDP_CORE_LOOKUP_
	sdp_core = c;
	int r = sdp_core.init(&sdp_host, environ);
	if (r > 0) {
		sdp_log(SDP_LOG_INFO, "core declined to run (reason %d); connections stay on kernel TCP", r);
		return r < SDPSHIM_REASON_MAX ? r : SDPSHIM_REASON_CORE_DECLINED;
	}
	if (r < 0) {
		sdp_log(SDP_LOG_WARN, "core failed to start (%s); connections stay on kernel TCP", strerror(-r));
		return SDPSHIM_REASON_CORE_FAILED;
	}
	sdp_log(SDP_LOG_DEBUG, "core %s loaded", sdp_core_path);
	return 0;
}

static long sdp_futex(int *word, int op, int val, const struct timespec *ts)
{
	return syscall(SYS_futex, word, op, val, ts, NULL, 0);
}

int sdp_core_acquire(void)
{
	int s = __atomic_load_n(&sdp_core_state, __ATOMIC_ACQUIRE);
	if (s == SDP_CORE_READY)
		return 1;
	if (s == SDP_CORE_OFF || sdp_passthrough())
		return 0;
	if (s == SDP_CORE_UNLOADED &&
	    __atomic_compare_exchange_n(&sdp_core_state, &s, SDP_CORE_LOADING, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		int saved = errno;
		sdp_guard_enter();
		int reason = sdp_core_try_load();
		sdp_guard_leave();
		if (reason != 0)
			__atomic_store_n(&sdp_core_reason, reason, __ATOMIC_RELEASE);
		__atomic_store_n(&sdp_core_state, reason ? SDP_CORE_OFF : SDP_CORE_READY, __ATOMIC_RELEASE);
		sdp_futex(&sdp_core_state, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL);
		errno = saved;
		return reason == 0;
	}
	/* Another thread is loading it. */
	int64_t deadline = sdp_now_ns() + SDP_CORE_LOAD_WAIT_NS;
	int saved = errno;
	while ((s = __atomic_load_n(&sdp_core_state, __ATOMIC_ACQUIRE)) == SDP_CORE_LOADING) {
		int64_t left = deadline - sdp_now_ns();
		if (left <= 0)
			break;
		struct timespec ts = {left / 1000000000LL, left % 1000000000LL};
		sdp_futex(&sdp_core_state, FUTEX_WAIT_PRIVATE, SDP_CORE_LOADING, &ts);
	}
	errno = saved;
	return s == SDP_CORE_READY;
}

void sdp_core_atfork_child(void)
{
	int s = __atomic_load_n(&sdp_core_state, __ATOMIC_ACQUIRE);
	if (s != SDP_CORE_READY && s != SDP_CORE_LOADING)
		return;
	if (s == SDP_CORE_READY) {
		SDP_CORE_DO(sdp_core.fork_child()); /* C inside the core library: no Go */
	}
	__atomic_store_n(&sdp_core_reason, SDPSHIM_REASON_FORK_DECLINE, __ATOMIC_RELEASE);
	__atomic_store_n(&sdp_core_state, SDP_CORE_OFF, __ATOMIC_RELEASE);
	/* Inherited connections were switched to kernel TCP by fork_prepare
	 * and are UNMANAGED already; what is left MANAGED (emulated epoll
	 * sets) is counted; listeners stay CANDIDATE and count each accept. */
	unsigned long n = sdp_fd_forget_all();
	__atomic_add_fetch(&sdp_fallback[SDPSHIM_REASON_FORK_DECLINE], n, __ATOMIC_RELAXED);
	if (n > 0)
		sdpshim_probe_fallback(SDPSHIM_REASON_FORK_DECLINE, -1, 0); /* once for the n fds */
}
