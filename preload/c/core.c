/*
 * core.c - loading the Go core (libsdpshim-core.so) and living without it.
 *
 * The core is loaded on the first TCP socket of the process, by the thread
 * that creates it, and never:
 *   - when SDPSHIM_ENABLE is 0/false/no/off (a bad value is reported once
 *     and also keeps it off);
 *   - in an AT_SECURE process (setuid, setgid, file capabilities);
 *   - when a Go runtime is already in the process (sdp_go_host);
 *   - in a vfork child, or a fork child of a process whose core was loading.
 * A fork child of a process whose core runs cannot enter that core (the old
 * runtime hangs there): it loads a private copy of it on first need
 * ("generations" below).
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
#include "sigcount.h"
#include "../../probes/c/probe.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <ucontext.h>
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

void sdp_fork_decline_count(unsigned long n)
{
	__atomic_add_fetch(&sdp_fallback[SDPSHIM_REASON_FORK_DECLINE], n, __ATOMIC_RELAXED);
	if (n > 0)
		sdpshim_probe_fallback(SDPSHIM_REASON_FORK_DECLINE, -1, 0); /* once for the n fds */
}

/* ---- the host side of the ABI ----------------------------------------------- */

static int host_child_cores(void);
static void host_fork_work(int need);
/* An unseen socket is CANDIDATE to the core, and asking adopts nothing
 * (the core asks with the guard held). */
static int host_fd_state(int fd) { return sdp_fd_state(fd); }
/* The core sets the states it knows; the interposer's own are its own. */
static int host_fd_set_state(int fd, int state)
{
	return state <= SDPSHIM_FD_PROTECTED ? sdp_fd_set(fd, state) : -EINVAL;
}
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
	.child_cores = host_child_cores,
	.direct_attach = sdp_direct_attach,
	.epoll_publish = sdp_epoll_publish,
	.epoll_stale = sdp_epoll_stale,
	.epoll_update = sdp_epoll_update,
	.fork_work = host_fork_work,
	.fork_keep = sdp_fork_keep,
	.fork_ready = sdp_core_prepare_fork,
	.poll_kick = sdp_pollkick_all,
	.poll_bells = sdp_pollkick_bells,
	.poll_bell = sdp_pollkick_bell,
	.epoll_append = sdp_epoll_append,
	.accept_listener = sdp_plain_listener,
	.accept_held = sdp_plain_held,
	.accept_quiet = sdp_plain_quiet,
	.accept_plain = &sdp_plain_accepts,
	.short_run = sdp_short_run,
	.short_left = sdp_short_left,
	.short_take = sdp_short_take,
	.short_plain = &sdp_short_plains,
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

/* ---- signal handlers across generations ---------------------------------------------- */

/* The Go runtime installs handlers (SIGSEGV, SIGBUS, SIGFPE, SIGPIPE,
 * SIGURG) whose code lies in the image it runs, and forwards what it does
 * not handle to the handlers it found. In a fork child that image is dead
 * (its runtime has no threads), and a fresh copy would take those dead
 * handlers for the program's. So the sigaction of every signal is
 * recorded once, before the first core of the process tree loads, and a
 * fork child gives each signal whose handler lies in the image its parent
 * ran back its recorded action. Handlers the program installed since stay.
 * The child looks only at the signals whose handler lay in the image once
 * its core had started (sdp_sig_note_go): the runtime of a c-shared
 * library installs no other (only os/signal would, which the core does
 * not use), and reading all 64 cost a postgres backend 64 system calls. */
static struct sigaction sdp_sig_pre[NSIG];
static unsigned char sdp_sig_pre_ok[NSIG];
static unsigned char sdp_sig_go[NSIG];
static int sdp_sig_recorded;
/* Where the running core is mapped (its PT_LOAD segments); 0, 0: unknown. */
static uintptr_t sdp_core_img_lo, sdp_core_img_hi;

static void sdp_sig_record(void)
{
	if (sdp_sig_recorded)
		return;
	for (int sig = 1; sig < NSIG; sig++)
		sdp_sig_pre_ok[sig] = sigaction(sig, NULL, &sdp_sig_pre[sig]) == 0;
	sdp_sig_recorded = 1;
}

/* Whether act's handler lies in [lo, hi). */
static int sdp_sig_in(const struct sigaction *act, uintptr_t lo, uintptr_t hi)
{
	uintptr_t a = (act->sa_flags & SA_SIGINFO) ? (uintptr_t)act->sa_sigaction : (uintptr_t)act->sa_handler;
	return a >= lo && a < hi;
}

/* Async-signal-safe: in a fork child, before fork() returns. */
static void sdp_sig_restore(void)
{
	uintptr_t lo = sdp_core_img_lo, hi = sdp_core_img_hi;
	if (!sdp_sig_recorded || lo >= hi)
		return;
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction cur;
		/* The kernel's action, read without the program's sigaction
		 * (which blocks every signal around each call: two more system
		 * calls a signal, in every fork child). */
		if (!sdp_sig_go[sig] || !sdp_sig_pre_ok[sig] || sdp_sig_kernel(sig, &cur) != 0)
			continue;
		if (sdp_sig_in(&cur, lo, hi))
			sigaction(sig, &sdp_sig_pre[sig], NULL);
	}
}

static uintptr_t sdp_page_size(void)
{
	uintptr_t pg = (uintptr_t)getauxval(AT_PAGESZ);
	return pg != 0 ? pg : 4096;
}

/* The page-aligned range [*lo, *hi) of the signal stack ss. */
static void sdp_altstack_range(const stack_t *ss, uintptr_t *lo, uintptr_t *hi)
{
	uintptr_t pg = sdp_page_size();
	*lo = (uintptr_t)ss->ss_sp & ~(pg - 1);
	*hi = ((uintptr_t)ss->ss_sp + ss->ss_size + pg - 1) & ~(pg - 1);
}

void sdp_core_fork_stack(void)
{
	if (sdp_core_img_hi == 0)
		return; /* no runtime was ever loaded here */
	int saved = errno;
	stack_t ss;
	if (sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK) && ss.ss_size > 0) {
		uintptr_t lo, hi;
		sdp_altstack_range(&ss, &lo, &hi);
		madvise((void *)lo, hi - lo, MADV_DOFORK);
	}
	errno = saved;
}

void sdp_altstack_check(void)
{
	if (sdp_core_img_hi == 0)
		return; /* no runtime was ever loaded here */
	int saved = errno;
	stack_t ss;
	if (sigaltstack(NULL, &ss) == 0 && !(ss.ss_flags & SS_DISABLE) && ss.ss_size > 0) {
		uintptr_t lo, hi;
		sdp_altstack_range(&ss, &lo, &hi);
		unsigned char vec[64];
		/* mincore fails with ENOMEM on unmapped memory; the first
		 * pages tell, a mapping left out of the child is gone whole. */
		uintptr_t pg = sdp_page_size();
		size_t len = hi - lo < 64 * pg ? hi - lo : 64 * pg;
		if (mincore((void *)lo, len, vec) != 0 && errno == ENOMEM) {
			stack_t off = {.ss_flags = SS_DISABLE};
			sigaltstack(&off, NULL);
		}
	}
	errno = saved;
}

/* The core's sdpshim_core_fork_inherit (preload/entry/forkmem.c); NULL
 * in a core without it. */
static void (*sdp_core_fork_inherit)(void);

void sdp_core_fork_inherit_all(void)
{
	void (*inherit)(void) = __atomic_load_n(&sdp_core_fork_inherit, __ATOMIC_ACQUIRE);
	if (inherit != NULL)
		inherit();
}

/* Marks the signals whose handler lies in the running core's image: once
 * its init returned (the runtime has installed its handlers then). */
static void sdp_sig_note_go(void)
{
	uintptr_t lo = sdp_core_img_lo, hi = sdp_core_img_hi;
	for (int sig = 1; sig < NSIG && lo < hi; sig++) {
		struct sigaction cur;
		if (sdp_sig_kernel(sig, &cur) == 0 && sdp_sig_in(&cur, lo, hi))
			sdp_sig_go[sig] = 1;
	}
}

struct sdp_img_query {
	ElfW(Addr) base;
	const char *name;
	uintptr_t lo, hi;
};

static int sdp_img_find(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct sdp_img_query *q = arg;
	if (info->dlpi_addr != q->base || info->dlpi_name == NULL || strcmp(info->dlpi_name, q->name) != 0)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t a = (uintptr_t)(info->dlpi_addr + ph->p_vaddr);
		if (q->lo == 0 || a < q->lo)
			q->lo = a;
		if (a + ph->p_memsz > q->hi)
			q->hi = a + ph->p_memsz;
	}
	return 1;
}

/* Records where the object h is mapped. */
static void sdp_core_note_image(void *h)
{
	struct link_map *lm = NULL;
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || lm == NULL || lm->l_name == NULL)
		return;
	struct sdp_img_query q = {.base = lm->l_addr, .name = lm->l_name};
	if (dl_iterate_phdr(sdp_img_find, &q) != 0 && q.lo < q.hi) {
		sdp_core_img_lo = q.lo;
		sdp_core_img_hi = q.hi;
	}
}

/* ---- SIGCHLD and the runtime's threads --------------------------------------------------- */

/* The Go runtime unblocks SIGCHLD in every thread it makes, c-shared or not
 * (runtime.blockableSig: _SigUnblock), although it installs no handler for
 * it. A child's exit is signalled to the process, and the kernel gives it
 * to any thread that does not block it: often a runtime thread, where the
 * program's handler then runs on a goroutine stack, beside the program's
 * own threads, even while the program blocks SIGCHLD to choose when its
 * handler may run (the postgres postmaster runs its reaper, which forks,
 * only inside select()). (The runtime's set-up of a program thread that
 * calls in does the same: sdp_thread_first in shim.h undoes it.) So when
 * a core loads and the program has a SIGCHLD handler,
 * a router takes its place: on a program thread it calls the program's
 * handler as the kernel would have; on a runtime thread it sends the
 * signal to the process again (rt_sigqueueinfo, same payload, si_code
 * SI_QUEUE; kill() if refused) and returns with SIGCHLD blocked in that
 * thread (its saved mask), so the signal stays pending until a program
 * thread accepts it, as without the core. A handler installed through the
 * interposer's sigaction (every libc installation) runs behind the
 * counting trampoline, which routes SIGCHLD the same way (sigcount.c), so
 * the router stands only for one installed by other means (the raw system
 * call, sigset); with SIG_DFL or SIG_IGN nothing changes (a runtime thread
 * discards the signal as the program would). */
static struct sigaction sdp_chld_prog; /* the program's action behind the router */
static ptrdiff_t sdp_core_g_off;       /* the runtime's g slot, from the thread pointer */
static int sdp_core_g_known;

SDP_TLS int sdp_thread_calls_core;

void sdp_thread_first(sigset_t *saved)
{
	sdp_thread_calls_core = 1;
	pthread_sigmask(SIG_BLOCK, NULL, saved);
}

void sdp_thread_first_done(const sigset_t *saved)
{
	int e = errno;
	pthread_sigmask(SIG_SETMASK, saved, NULL);
	errno = e;
}

/* A thread of the runtime: its g is set (Go ran on it), and it never
 * called into the core (program threads keep their g between hooks). */
static int sdp_on_runtime_thread(void)
{
	if (!__atomic_load_n(&sdp_core_g_known, __ATOMIC_ACQUIRE) || sdp_thread_calls_core)
		return 0;
	return *(void *volatile *)((char *)__builtin_thread_pointer() + sdp_core_g_off) != NULL;
}

int sdp_sig_away_from_runtime(int sig, siginfo_t *info, void *ucv)
{
	if (!sdp_on_runtime_thread())
		return 0;
	int saved = errno;
	sigaddset(&((ucontext_t *)ucv)->uc_sigmask, sig);
	siginfo_t si = *info;
	si.si_code = SI_QUEUE; /* only the kernel may send a positive code */
	if (syscall(SYS_rt_sigqueueinfo, getpid(), sig, &si) != 0)
		kill(getpid(), sig);
	errno = saved;
	return 1;
}

static void sdp_chld_router(int sig, siginfo_t *info, void *ucv)
{
	if (sdp_sig_away_from_runtime(sig, info, ucv))
		return;
	if (sdp_chld_prog.sa_flags & SA_SIGINFO)
		sdp_chld_prog.sa_sigaction(sig, info, ucv);
	else if (sdp_chld_prog.sa_handler != SIG_DFL && sdp_chld_prog.sa_handler != SIG_IGN)
		sdp_chld_prog.sa_handler(sig);
}

#if defined(__x86_64__)
/* The ABI's TLS lookup (ld.so): for a module with static TLS, such as a
 * Go c-shared library (its only TLS variable is the runtime's g), it
 * returns the slot at the same offset from the thread pointer in every
 * thread. dlinfo(RTLD_DI_TLS_DATA) answers NULL until a thread called it. */
typedef struct {
	unsigned long ti_module;
	unsigned long ti_offset;
} sdp_tls_index;
extern void *__tls_get_addr(sdp_tls_index *);

static void *sdp_core_tls_block(void *h)
{
	size_t modid = 0;
	if (dlinfo(h, RTLD_DI_TLS_MODID, &modid) != 0 || modid == 0)
		return NULL;
	sdp_tls_index ti = {modid, 0};
	return __tls_get_addr(&ti);
}
#else
static void *sdp_core_tls_block(void *h)
{
	(void)h;
	return NULL; /* no router: the runtime's threads cannot be told apart */
}
#endif

/* After the core h loaded: where its runtime keeps g, and the router. */
static void sdp_core_route_sigchld(void *h)
{
	__atomic_store_n(&sdp_core_g_known, 0, __ATOMIC_RELEASE);
	void *blk = sdp_core_tls_block(h);
	if (blk == NULL)
		return;
	sdp_core_g_off = (char *)blk - (char *)__builtin_thread_pointer();
	__atomic_store_n(&sdp_core_g_known, 1, __ATOMIC_RELEASE);
	struct sigaction cur;
	if (sigaction(SIGCHLD, NULL, &cur) != 0)
		return;
	if (cur.sa_flags & SA_SIGINFO) {
		if (cur.sa_sigaction == sdp_chld_router)
			return; /* routed already (a fork child loading its copy) */
	} else if (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN) {
		return;
	}
	if (sdp_sig_counted(&cur)) { /* the trampoline routes it (sigcount.c) */
		sdp_log(SDP_LOG_DEBUG, "SIGCHLD handler routed away from the runtime's threads");
		return;
	}
	sdp_chld_prog = cur;
	struct sigaction r = cur;
	r.sa_sigaction = sdp_chld_router;
	r.sa_flags |= SA_SIGINFO;
	if (sigaction(SIGCHLD, &r, NULL) == 0)
		sdp_log(SDP_LOG_DEBUG, "SIGCHLD handler routed away from the runtime's threads");
}

/* ---- generations: a private copy of the core for each fork child -------------------------- */

/* A fork child cannot enter its parent's Go runtime (its threads are
 * gone), but it can start a fresh one: glibc tells loaded objects apart by
 * name, then by device and inode, so dlopen() of another file holding the
 * same bytes maps a second, independent copy. Before its first fork, a
 * process running the core makes that file ("next core"): a sealed memfd
 * copy of the image it runs, kept open for good (close-on-exec, PROTECTED,
 * at a high fd number) and shared by all its fork children (one page
 * cache). A child loads it on first need (state FORKED) and, before its
 * own first fork, makes its own copy: its image is loaded, dead, in a
 * grandchild, which needs yet another inode. */
static int sdp_core_image_fd = -1; /* the memfd this process's core came from; -1: sdp_core_path */
static int sdp_core_next_fd = -1;  /* READY: the copy for children (-1 until the first fork);
				    * FORKED: the copy to load */
static int sdp_core_next_busy;     /* futex word: 1 while a thread makes the copy */
static int sdp_core_next_failed;   /* making it failed once: children stay off */
static dev_t sdp_core_file_dev;    /* the file at sdp_core_path that was loaded */
static ino_t sdp_core_file_ino;

/* Fork children run a core unless making the copy failed (then it is not
 * tried again): a prediction before the first fork, which makes it. */
static int host_child_cores(void) { return !__atomic_load_n(&sdp_core_next_failed, __ATOMIC_RELAXED); }

/* host->fork_work: whether forks need the core's fork_prepare. 1 until
 * the core says otherwise. */
static int sdp_fork_need = 1;
static void host_fork_work(int need) { __atomic_store_n(&sdp_fork_need, need != 0, __ATOMIC_SEQ_CST); }
int sdp_core_fork_needed(void) { return __atomic_load_n(&sdp_fork_need, __ATOMIC_SEQ_CST); }

/* The lowest number the copy may take: where the core keeps its own fds
 * (core/fdhook/spare.go, HighBase: half the soft RLIMIT_NOFILE, at most
 * SDP_FD_HIGH_MAX, at least 64), above what programs that size tables by
 * their fds use (select's FD_SETSIZE). One region for both: the kernel's
 * fd table grows once for it (sdp_fd_table_reserve). A fork copies that
 * table up to the highest open fd, and the child's forgetting (fdtable.c)
 * walks every fd up to the highest the shim marked, so the region stays
 * low: at half a 20000 limit every fork of a process took about 100 us
 * longer than at 1024 (at RLIMIT_NOFILE - 32, where it was first, 150). */
#define SDP_FD_HIGH_MAX 1024
int sdp_core_high_fd(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < 128)
		return 64;
	rlim_t half = rl.rlim_cur == RLIM_INFINITY ? SDP_FD_HIGH_MAX : rl.rlim_cur / 2;
	return half > SDP_FD_HIGH_MAX ? SDP_FD_HIGH_MAX : (int)half;
}

/* Grows the kernel's fd table over the region of the shim's own fds
 * before the core's runtime starts its threads. The kernel grows a table
 * shared by several threads only after an RCU grace period: 11-19 ms
 * here, which the first connection (its eventfds) or the first fork (the
 * copy above) paid; a process with one thread grows it in microseconds. */
static void sdp_fd_table_reserve(void)
{
	int base = sdp_core_high_fd();
	int src = (int)syscall(SYS_openat, AT_FDCWD, "/", O_PATH | O_CLOEXEC);
	if (src < 0)
		return;
	/* 64 numbers on: room for the core's first fds before the table's
	 * next size (a power of two). */
	int d = sdp_real.fcntl(src, F_DUPFD_CLOEXEC, base + 64);
	if (d >= 0)
		syscall(SYS_close, d);
	syscall(SYS_close, src);
}

/* Makes the next-core memfd; the fd, or -1 (logged). Guarded. */
static int sdp_core_make_next(void)
{
	int src = sdp_core_image_fd;
	const char *what = "its memfd";
	if (src < 0) {
		what = sdp_core_path;
		src = open(sdp_core_path, O_RDONLY | O_CLOEXEC);
		if (src < 0) {
			sdp_log(SDP_LOG_WARN, "fork: cannot reopen core %s (%s); fork children stay on kernel TCP",
				sdp_core_path, strerror(errno));
			return -1;
		}
	}
	int m = -1;
	void *map = MAP_FAILED;
	struct stat st;
	if (fstat(src, &st) != 0 || st.st_size <= 0)
		goto fail;
	if (src != sdp_core_image_fd && (st.st_dev != sdp_core_file_dev || st.st_ino != sdp_core_file_ino)) {
		sdp_log(SDP_LOG_WARN, "fork: core %s was replaced since it was loaded; fork children stay on kernel TCP",
			sdp_core_path);
		errno = ESTALE;
		goto fail;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, src, 0);
	if (map == MAP_FAILED)
		goto fail;
	m = memfd_create("sdpshim-core", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (m < 0)
		goto fail;
	for (off_t off = 0; off < st.st_size;) {
		ssize_t w = pwrite(m, (char *)map + off, (size_t)(st.st_size - off), off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			goto fail;
		off += w;
	}
	if (sdp_real.fcntl(m, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0)
		goto fail;
	int lo = sdp_core_high_fd();
	if (lo > m) {
		int h = sdp_real.fcntl(m, F_DUPFD_CLOEXEC, lo);
		if (h >= 0) {
			sdp_real.close(m);
			m = h;
		}
	}
	munmap(map, (size_t)st.st_size);
	if (src != sdp_core_image_fd)
		sdp_real.close(src);
	sdp_fd_set(m, SDPSHIM_FD_PROTECTED);
	sdp_log(SDP_LOG_DEBUG, "fork: core copy for fork children in fd %d (%lld bytes)", m, (long long)st.st_size);
	return m;
fail:;
	int e = errno;
	if (m >= 0)
		sdp_real.close(m);
	if (map != MAP_FAILED)
		munmap(map, (size_t)st.st_size);
	if (src != sdp_core_image_fd)
		sdp_real.close(src);
	sdp_log(SDP_LOG_WARN, "fork: cannot copy core (from %s) for fork children (%s); they stay on kernel TCP",
		what, strerror(e));
	return -1;
}

static long sdp_futex(int *word, int op, int val, const struct timespec *ts)
{
	return syscall(SYS_futex, word, op, val, ts, NULL, 0);
}

int sdp_futex_wait_while(int *word, int val, int64_t deadline)
{
	int saved = errno, v;
	while ((v = __atomic_load_n(word, __ATOMIC_ACQUIRE)) == val) {
		int64_t left = deadline - sdp_now_ns();
		if (left <= 0)
			break;
		struct timespec ts = {left / 1000000000LL, left % 1000000000LL};
		sdp_futex(word, FUTEX_WAIT_PRIVATE, val, &ts);
	}
	errno = saved;
	return v;
}

/* fork()s this process made while its core ran (sdp_core_fork_copy). */
static int sdp_core_forks;
/* fork()s in progress (sdp_core_fork_copy to sdp_core_fork_done). */
static int sdp_core_forking;

void sdp_core_fork_copy(void)
{
	/* The first fork makes no copy (a few ms): its child, if it ever
	 * needs a core, makes its own. From the second on (a process that
	 * forks children one after the other) the children share one. A
	 * listening process made it ahead (host->fork_ready). */
	if (__atomic_fetch_add(&sdp_core_forks, 1, __ATOMIC_RELAXED) > 0)
		sdp_core_prepare_fork();
	/* No copy is made across the fork by another thread (fork_ready's):
	 * the kernel copies the fd table before the memory, so a child could
	 * find the copy's number stored and no such fd ("/proc/self/fd/N: No
	 * such file or directory", under load). Counted in, then a copy in
	 * progress is waited for (bounded); a thread that starts one looks
	 * at the count after taking the busy word, and gives up (Dekker,
	 * sdp_core_prepare_fork). */
	__atomic_fetch_add(&sdp_core_forking, 1, __ATOMIC_SEQ_CST);
	int saved = errno;
	sdp_futex_wait_while(&sdp_core_next_busy, 1, sdp_now_ns() + SDP_CORE_LOAD_WAIT_NS);
	errno = saved;
}

void sdp_core_fork_done(void) { __atomic_fetch_sub(&sdp_core_forking, 1, __ATOMIC_SEQ_CST); }

void sdp_core_prepare_fork(void)
{
	if (__atomic_load_n(&sdp_core_next_fd, __ATOMIC_ACQUIRE) >= 0 ||
	    __atomic_load_n(&sdp_core_next_failed, __ATOMIC_RELAXED))
		return;
	int saved = errno;
	int idle = 0;
	if (__atomic_compare_exchange_n(&sdp_core_next_busy, &idle, 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE)) {
		/* Not across another thread's fork (sdp_core_fork_copy): a later
		 * fork makes it, or the child its own. */
		if (__atomic_load_n(&sdp_core_next_fd, __ATOMIC_ACQUIRE) < 0 &&
		    __atomic_load_n(&sdp_core_forking, __ATOMIC_SEQ_CST) == 0) {
			sdp_guard_enter();
			int m = sdp_core_make_next();
			sdp_guard_leave();
			if (m >= 0)
				__atomic_store_n(&sdp_core_next_fd, m, __ATOMIC_RELEASE);
			else
				__atomic_store_n(&sdp_core_next_failed, 1, __ATOMIC_RELAXED);
		}
		__atomic_store_n(&sdp_core_next_busy, 0, __ATOMIC_RELEASE);
		sdp_futex(&sdp_core_next_busy, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL);
	} else { /* another thread forks and makes it: wait (bounded) */
		sdp_futex_wait_while(&sdp_core_next_busy, 1, sdp_now_ns() + SDP_CORE_LOAD_WAIT_NS);
	}
	errno = saved;
}

int sdp_core_evict_own(int fd)
{
	int *slot = NULL;
	if (fd >= 0 && fd == __atomic_load_n(&sdp_core_next_fd, __ATOMIC_ACQUIRE))
		slot = &sdp_core_next_fd;
	else if (fd >= 0 && fd == __atomic_load_n(&sdp_core_image_fd, __ATOMIC_ACQUIRE))
		slot = &sdp_core_image_fd;
	if (slot == NULL)
		return -1;
	int saved = errno;
	int lo = sdp_core_high_fd();
	int h = sdp_real.fcntl(fd, F_DUPFD_CLOEXEC, lo > fd ? lo : fd + 1);
	if (h < 0) {
		errno = saved;
		return -1;
	}
	sdp_fd_set(h, SDPSHIM_FD_PROTECTED);
	__atomic_store_n(slot, h, __ATOMIC_RELEASE);
	sdp_fd_set(fd, SDPSHIM_FD_UNMANAGED);
	sdp_real.close(fd);
	errno = saved;
	return 0;
}

/* ---- loading ---------------------------------------------------------------------- */

/* The environment the first core of this process line was initialised
 * with, kept for the copies fork children load: a child may have changed
 * its own (nginx workers keep only TZ), yet its core must run as its
 * parent's does (same run directory, log settings, knobs). Made once, by
 * the thread loading the first core; inherited by fork, never freed. */
static char **sdp_core_env;

/* Copies environ into sdp_core_env; on allocation failure the live one is
 * used. */
static char **sdp_core_env_snapshot(void)
{
	extern char **environ;
	if (sdp_core_env != NULL || environ == NULL)
		return sdp_core_env ? sdp_core_env : environ;
	size_t n = 0;
	while (environ[n] != NULL)
		n++;
	char **env = calloc(n + 1, sizeof *env);
	if (env == NULL)
		return environ;
	for (size_t i = 0; i < n; i++) {
		if ((env[i] = strdup(environ[i])) == NULL) {
			while (i > 0)
				free(env[--i]);
			free(env);
			return environ;
		}
	}
	sdp_core_env = env;
	return env;
}

/* dlopen(path), every entry point, init: 0 or a reason. chosen: the path
 * is the user's (SDPSHIM_CORE). */
static int sdp_core_open(const char *path, int chosen)
{
	/* The Go runtime's threads start with the mask of the thread that
	 * loads it: with the program's signals held, a process-directed signal
	 * (SIGTERM, SIGINT, ...) always goes to one of the program's threads,
	 * interrupting its blocking call there, never to a runtime thread. */
	sigset_t held;
	/* The Go runtime raises the soft RLIMIT_NOFILE to its hard limit as
	 * it starts (its syscall package's init): put back after init, the
	 * program's limit stays the program's (a server at its limit fails
	 * the way it would without the shim). */
	struct rlimit nofile;
	int limited = getrlimit(RLIMIT_NOFILE, &nofile) == 0;
	sdp_fd_table_reserve();
	sdp_fork_register();
	sdp_signals_hold(&held);
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	sdp_signals_release(&held);
	if (h == NULL) {
		const char *err = dlerror();
		/* A path the user chose is a configuration problem; the default
		 * one missing is an installation matter, logged at warn level. */
		if (chosen)
			sdp_report("SDPSHIM_CORE=\"%.64s\": cannot load it (%s); the shim is disabled, the program "
				   "runs on plain TCP",
				   path, err ? err : "?");
		else
			sdp_log(SDP_LOG_WARN, "core not loaded: %s; connections stay on kernel TCP", err ? err : "?");
		return SDPSHIM_REASON_CORE_MISSING;
	}
	struct sdp_core c;
#define SDP_CORE_LOOKUP_(ret, name, params)                                                       \
	c.name = (sdpshim_core_##name##_fn *)dlsym(h, "sdpshim_core_" #name);                  \
	if (c.name == NULL) {                                                                      \
		sdp_log(SDP_LOG_WARN, "core %s lacks sdpshim_core_" #name "; connections stay on kernel TCP", \
			path);                                                                     \
		return SDPSHIM_REASON_CORE_INCOMPLETE;                                                 \
	}
	SDPSHIM_CORE_ENTRY_POINTS(SDP_CORE_LOOKUP_)
#undef SDP_CORE_LOOKUP_
	sdp_core_note_image(h);
	__atomic_store_n(&sdp_core_fork_inherit, (void (*)(void))dlsym(h, "sdpshim_core_fork_inherit"), __ATOMIC_RELEASE);
	sdp_core = c;
	int r = sdp_core.init(&sdp_host, sdp_core_env_snapshot());
	if (limited)
		setrlimit(RLIMIT_NOFILE, &nofile);
	if (r > 0) {
		sdp_log(SDP_LOG_INFO, "core declined to run (reason %d); connections stay on kernel TCP", r);
		return r < SDPSHIM_REASON_MAX ? r : SDPSHIM_REASON_CORE_DECLINED;
	}
	if (r < 0) {
		sdp_log(SDP_LOG_WARN, "core failed to start (%s); connections stay on kernel TCP", strerror(-r));
		return SDPSHIM_REASON_CORE_FAILED;
	}
	sdp_core_route_sigchld(h);
	sdp_sig_note_go();
	sdp_log(SDP_LOG_DEBUG, "core %s loaded", path);
	return 0;
}

static int sdp_name_loaded(struct dl_phdr_info *info, size_t size, void *name)
{
	(void)size;
	return info->dlpi_name != NULL && strcmp(info->dlpi_name, (const char *)name) == 0;
}

/* A fork child loads the copy its parent made: 0 or a reason. */
static int sdp_core_try_load_copy(void)
{
	/* The child's own core never sees the fds its parent kept
	 * accelerated: they are switched and plain by now (forkkeep.c). */
	sdp_fork_kept_resolve(-1);
	int fd = __atomic_load_n(&sdp_core_next_fd, __ATOMIC_ACQUIRE);
	int reason = sdp_core_enabled();
	if (reason == 0 && fd < 0 && (fd = sdp_core_make_next()) < 0) {
		/* The parent forked without a copy (its first fork): this child
		 * makes its own, from its parent's image (logged on failure). */
		reason = SDPSHIM_REASON_CORE_MISSING;
	} else if (reason != 0) {
		sdp_log(SDP_LOG_INFO, "fork child: core not loaded: SDPSHIM_ENABLE turns the shim off");
	} else {
		/* glibc matches a loaded object by name before it opens the
		 * file: an ancestor's copy, loaded (dead) here, may bear the
		 * name /proc/self/fd/N. Another spelling of the same path is
		 * another name. */
		char path[64 + 2 * 16];
		int ok = 0;
		for (int dots = 0; dots < 16 && !ok; dots++) {
			int n = snprintf(path, sizeof path, "/proc/self/");
			for (int i = 0; i < dots; i++)
				n += snprintf(path + n, sizeof path - (size_t)n, "./");
			snprintf(path + n, sizeof path - (size_t)n, "fd/%d", fd);
			ok = dl_iterate_phdr(sdp_name_loaded, path) == 0;
		}
		if (!ok) {
			sdp_log(SDP_LOG_WARN, "fork child: no free name for the core copy; connections stay on kernel TCP");
			reason = SDPSHIM_REASON_CORE_MISSING;
		} else {
			reason = sdp_core_open(path, 0);
		}
	}
	/* The parent's image (kept for a copy of our own) is of no use now. */
	int img = __atomic_exchange_n(&sdp_core_image_fd, -1, __ATOMIC_ACQ_REL);
	if (img >= 0) {
		sdp_fd_set(img, SDPSHIM_FD_UNMANAGED);
		sdp_real.close(img);
	}
	if (reason == 0) {
		__atomic_store_n(&sdp_core_image_fd, fd, __ATOMIC_RELEASE);
	} else if (fd >= 0) {
		sdp_fd_set(fd, SDPSHIM_FD_UNMANAGED);
		sdp_real.close(fd);
	}
	__atomic_store_n(&sdp_core_next_fd, -1, __ATOMIC_RELEASE);
	return reason;
}

/* One attempt, by the thread that won the LOADING state (from the state
 * from); 0 or a reason. */
static int sdp_core_try_load(int from)
{
	int reason;
	if (from == SDP_CORE_FORKED)
		return sdp_core_try_load_copy();
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
	sdp_sig_record();
	struct stat st;
	if (stat(sdp_core_path, &st) == 0) {
		sdp_core_file_dev = st.st_dev;
		sdp_core_file_ino = st.st_ino;
	}
	return sdp_core_open(sdp_core_path, sdp_core_path_chosen);
}

int sdp_core_acquire(void)
{
	int s = __atomic_load_n(&sdp_core_state, __ATOMIC_ACQUIRE);
	if (s == SDP_CORE_READY)
		return 1;
	if (s == SDP_CORE_OFF || sdp_passthrough())
		return 0;
	int from = s;
	if ((s == SDP_CORE_UNLOADED || s == SDP_CORE_FORKED) &&
	    __atomic_compare_exchange_n(&sdp_core_state, &s, SDP_CORE_LOADING, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		int saved = errno;
		sigset_t mask;
		int first = !sdp_thread_calls_core;
		if (first)
			sdp_thread_first(&mask);
		sdp_guard_enter();
		int reason = sdp_core_try_load(from);
		sdp_guard_leave();
		if (first)
			sdp_thread_first_done(&mask);
		if (reason != 0)
			__atomic_store_n(&sdp_core_reason, reason, __ATOMIC_RELEASE);
		__atomic_store_n(&sdp_core_state, reason ? SDP_CORE_OFF : SDP_CORE_READY, __ATOMIC_RELEASE);
		sdp_futex(&sdp_core_state, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL);
		errno = saved;
		return reason == 0;
	}
	/* Another thread is loading it. */
	return sdp_futex_wait_while(&sdp_core_state, SDP_CORE_LOADING, sdp_now_ns() + SDP_CORE_LOAD_WAIT_NS) ==
	       SDP_CORE_READY;
}

void sdp_core_atfork_child(int keep, int mine)
{
	/* The child's one thread is a program thread, and no runtime has a
	 * thread here: nothing for the SIGCHLD router to send on until a
	 * copy loads; that copy's first call on this thread is a first one. */
	__atomic_store_n(&sdp_core_g_known, 0, __ATOMIC_RELEASE);
	sdp_thread_calls_core = 0;
	int s = __atomic_load_n(&sdp_core_state, __ATOMIC_ACQUIRE);
	/* UNLOADED, OFF: as the parent; FORKED: the parent's copy is still
	 * unused, the child may load it as well. */
	if (s != SDP_CORE_READY && s != SDP_CORE_LOADING)
		return;
	if (s == SDP_CORE_READY) {
		/* C inside the core library, no Go: not a first call */
		sdp_guard_enter();
		sdp_core.fork_child();
		sdp_guard_leave();
		sdp_sig_restore();
	}
	int next = __atomic_load_n(&sdp_core_next_fd, __ATOMIC_ACQUIRE);
	int img = __atomic_load_n(&sdp_core_image_fd, __ATOMIC_ACQUIRE);
	int failed = __atomic_load_n(&sdp_core_next_failed, __ATOMIC_RELAXED);
	__atomic_store_n(&sdp_core_next_busy, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&sdp_core_next_failed, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&sdp_core_forks, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&sdp_core_forking, 0, __ATOMIC_RELAXED);
	/* Inherited connections were switched to kernel TCP by fork_prepare
	 * and are UNMANAGED already, or kept (keep >= 0: forkkeep.c); what is
	 * left MANAGED (emulated epoll sets) is counted; listeners and unconnected sockets stay
	 * CANDIDATE (for this process's own core, or counted at each accept
	 * when it has none); the old core's PROTECTED fds become plain. */
	sdp_epoll_forget_all(); /* the parent's epoll sets' snapshots (their fds are plain here) */
	sdp_plain_forget();
	sdp_short_forget();
	sdp_pollkick_forget_all();
	if (!sdp_fork_keep_child(keep, mine)) {
		unsigned long n = sdp_fd_forget_all();
		sdp_direct_forget_all(); /* the parent's handles: its connections were switched */
		sdp_fork_decline_count(n);
	} /* else: they wait as SDP_FD_INHERITED, with their handles, for forkkeep.c */
	if (s == SDP_CORE_READY && (next >= 0 || !failed)) {
		if (next >= 0) {
			/* The parent's copy; its own image is of no use here. */
			sdp_fd_set(next, SDPSHIM_FD_PROTECTED);
			__atomic_store_n(&sdp_core_image_fd, -1, __ATOMIC_RELEASE);
			if (img >= 0)
				syscall(SYS_close, img);
		} else if (img >= 0) {
			/* No copy (the parent's first fork): the child makes its
			 * own at first need, from this image, or the core file. */
			sdp_fd_set(img, SDPSHIM_FD_PROTECTED);
		}
		/* CANDIDATE fds may be deferred connections the parent accepted */
		__atomic_store_n(&sdp_deferred_hint, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&sdp_core_state, SDP_CORE_FORKED, __ATOMIC_RELEASE);
		return;
	}
	__atomic_store_n(&sdp_core_image_fd, -1, __ATOMIC_RELEASE);
	if (img >= 0)
		syscall(SYS_close, img);
	__atomic_store_n(&sdp_core_next_fd, -1, __ATOMIC_RELEASE);
	if (next >= 0)
		syscall(SYS_close, next);
	__atomic_store_n(&sdp_core_reason, SDPSHIM_REASON_FORK_DECLINE, __ATOMIC_RELEASE);
	__atomic_store_n(&sdp_core_state, SDP_CORE_OFF, __ATOMIC_RELEASE);
}
