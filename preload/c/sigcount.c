/*
 * sigcount.c - sigaction, signal, bsd_signal, sysv_signal: the program's
 * handlers run behind a trampoline that counts them per thread (sigcount.h).
 *
 * What the program sees is unchanged: sigaction returns, as the old
 * action, exactly what the program installed (its handler, flags and
 * mask); SIG_DFL and SIG_IGN are installed as they are; the kernel gets
 * the trampoline with SA_SIGINFO and SA_ONSTACK added and every other
 * flag and the mask as given, so blocking, SA_NODEFER, SA_RESETHAND (the
 * trampoline forgets a one-shot handler as the kernel does), SA_NOCLDSTOP
 * and SA_RESTART itself behave as before. SA_ONSTACK: a signal may arrive
 * while the thread runs the core's Go code on a small goroutine stack;
 * the Go runtime gives such a thread an alternate signal stack, which a
 * handler uses only with SA_ONSTACK (what the Go documentation asks of
 * handlers in a process with Go in it). A thread without an alternate
 * stack runs the handler where it always did. Not wrapped: the synchronous
 * signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS), whose
 * handlers must see the faulting frame as the kernel delivers it, and
 * SIGURG (the Go runtime's preemption signal); and nothing installed while
 * the thread is inside the interposer or the core (sdp_guard): the Go
 * runtime's own handlers stay its own. Handlers installed by other means
 * (sigset, the raw system call) are not counted: a call interrupted by
 * one of those fails with EINTR, as it did before.
 *
 * A fork child inherits the table with the handlers, as the kernel's;
 * exec resets both.
 */
#include "shim.h"
#include "sigcount.h"

#include <dlfcn.h>
#include <signal.h>
#include <string.h>

#define SDP_NSIG 65

/* The program's action per signal while the trampoline stands for it. The
 * handler and flags are written before the kernel gets the trampoline and
 * read by it with plain atomic loads: a handler replaced concurrently with
 * a delivery runs either the old or the new one, as in the kernel. */
static struct {
	void *fn;	   /* sa_handler or sa_sigaction; NULL: not ours */
	int flags;	   /* the program's sa_flags */
	sigset_t mask;	   /* the program's sa_mask */
} sdp_sigtab[SDP_NSIG];

static int sdp_siglock; /* serialises installs (a spinlock: no allocation) */

static SDP_TLS unsigned int sdp_sig_ran, sdp_sig_norestart;

typedef int sigaction_fn(int, const struct sigaction *, struct sigaction *);
static sigaction_fn *sdp_real_sigaction;

static sigaction_fn *real_sigaction(void)
{
	sigaction_fn *f = __atomic_load_n(&sdp_real_sigaction, __ATOMIC_ACQUIRE);
	if (f == NULL) {
		f = (sigaction_fn *)dlsym(RTLD_NEXT, "sigaction");
		__atomic_store_n(&sdp_real_sigaction, f, __ATOMIC_RELEASE);
	}
	return f;
}

void sdp_sig_mark(struct sdp_sigmark *m)
{
	m->ran = __atomic_load_n(&sdp_sig_ran, __ATOMIC_RELAXED);
	m->norestart = __atomic_load_n(&sdp_sig_norestart, __ATOMIC_RELAXED);
}

enum sdp_sigsince sdp_sig_since(const struct sdp_sigmark *m)
{
	if (__atomic_load_n(&sdp_sig_norestart, __ATOMIC_RELAXED) != m->norestart)
		return SDP_SIG_INTERRUPT;
	if (__atomic_load_n(&sdp_sig_ran, __ATOMIC_RELAXED) != m->ran)
		return SDP_SIG_RESTART;
	return SDP_SIG_NONE;
}

static void sdp_sig_tramp(int sig, siginfo_t *info, void *uc)
{
	/* The runtime's threads take SIGCHLD (Go unblocks it in them): the
	 * program's handler runs on one of its own threads instead, as
	 * without the core (the router of core.c does the same for a handler
	 * installed before the interposer counted it). */
	if (sig == SIGCHLD && sdp_sig_away_from_runtime(sig, info, uc))
		return;
	void *fn = __atomic_load_n(&sdp_sigtab[sig].fn, __ATOMIC_ACQUIRE);
	int flags = __atomic_load_n(&sdp_sigtab[sig].flags, __ATOMIC_RELAXED);
	__atomic_store_n(&sdp_sig_ran, sdp_sig_ran + 1, __ATOMIC_RELAXED);
	if (!(flags & SA_RESTART))
		__atomic_store_n(&sdp_sig_norestart, sdp_sig_norestart + 1, __ATOMIC_RELAXED);
	if (flags & SA_RESETHAND) /* the kernel reset the disposition */
		__atomic_store_n(&sdp_sigtab[sig].fn, NULL, __ATOMIC_RELEASE);
	if (fn == NULL)
		return; /* replaced by SIG_DFL/SIG_IGN in the meantime */
	if (flags & SA_SIGINFO)
		((void (*)(int, siginfo_t *, void *))fn)(sig, info, uc);
	else
		((void (*)(int))fn)(sig);
}

int sdp_sig_counted(const struct sigaction *sa)
{
	return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == sdp_sig_tramp;
}

/* Signals whose handlers go to the kernel as they are. */
static int sdp_sig_direct(int sig)
{
	switch (sig) {
	case SIGSEGV:
	case SIGBUS:
	case SIGFPE:
	case SIGILL:
	case SIGTRAP:
	case SIGSYS:
	case SIGURG:
	case SIGKILL:
	case SIGSTOP:
		return 1;
	}
	return sig <= 0 || sig >= SDP_NSIG;
}

static void sdp_sig_lock(void)
{
	while (__atomic_exchange_n(&sdp_siglock, 1, __ATOMIC_ACQUIRE))
		;
}

static void sdp_sig_unlock(void) { __atomic_store_n(&sdp_siglock, 0, __ATOMIC_RELEASE); }

/* Turns what the kernel holds for sig into what the program installed. */
static void sdp_sig_translate(struct sigaction *old, void *prev_fn, int prev_flags, const sigset_t *prev_mask)
{
	if (old == NULL || old->sa_sigaction != sdp_sig_tramp)
		return;
	if (prev_fn == NULL) { /* a one-shot handler that ran: the kernel's default */
		old->sa_handler = SIG_DFL;
		old->sa_flags &= ~SA_SIGINFO;
		return;
	}
	old->sa_flags = prev_flags;
	old->sa_mask = *prev_mask;
	if (prev_flags & SA_SIGINFO)
		old->sa_sigaction = (void (*)(int, siginfo_t *, void *))prev_fn;
	else
		old->sa_handler = (void (*)(int))prev_fn;
}

SDP_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	sigaction_fn *real = real_sigaction();
	if (real == NULL) {
		errno = ENOSYS;
		return -1;
	}
	if (sdp_sig_direct(sig) || sdp_passthrough())
		return real(sig, act, old);
	int wrap = act != NULL && act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN;
	struct sigaction k;
	if (wrap) {
		k = *act;
		k.sa_flags |= SA_SIGINFO | SA_ONSTACK;
		k.sa_sigaction = sdp_sig_tramp;
	}
	/* Signals stay blocked while the table and the kernel disagree, so
	 * the trampoline never runs a half-written entry on this thread. */
	sigset_t all, saved;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &saved);
	sdp_sig_lock();
	void *prev_fn = sdp_sigtab[sig].fn;
	int prev_flags = sdp_sigtab[sig].flags;
	sigset_t prev_mask = sdp_sigtab[sig].mask;
	if (wrap) {
		sdp_sigtab[sig].mask = act->sa_mask;
		__atomic_store_n(&sdp_sigtab[sig].flags, act->sa_flags, __ATOMIC_RELAXED);
		__atomic_store_n(&sdp_sigtab[sig].fn,
				 act->sa_flags & SA_SIGINFO ? (void *)act->sa_sigaction : (void *)act->sa_handler,
				 __ATOMIC_RELEASE);
	}
	int r = real(sig, wrap ? &k : act, old);
	int err = errno;
	if (r != 0 && wrap) { /* the kernel refused: the table goes back */
		sdp_sigtab[sig].mask = prev_mask;
		__atomic_store_n(&sdp_sigtab[sig].flags, prev_flags, __ATOMIC_RELAXED);
		__atomic_store_n(&sdp_sigtab[sig].fn, prev_fn, __ATOMIC_RELEASE);
	} else if (r == 0 && act != NULL && !wrap) {
		__atomic_store_n(&sdp_sigtab[sig].fn, NULL, __ATOMIC_RELEASE);
	}
	if (r == 0)
		sdp_sig_translate(old, prev_fn, prev_flags, &prev_mask);
	sdp_sig_unlock();
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	errno = err;
	return r;
}

int sdp_sig_kernel(int sig, struct sigaction *cur)
{
	sigaction_fn *real = real_sigaction();
	if (real == NULL) {
		errno = ENOSYS;
		return -1;
	}
	return real(sig, NULL, cur);
}

/* signal() with the given flags, as glibc builds it. */
static sighandler_t sdp_signal_with(int sig, sighandler_t h, int flags, int mask_self)
{
	struct sigaction act, old;
	memset(&act, 0, sizeof act);
	act.sa_handler = h;
	sigemptyset(&act.sa_mask);
	if (mask_self && sig > 0 && sig < SDP_NSIG)
		sigaddset(&act.sa_mask, sig);
	act.sa_flags = flags;
	if (sigaction(sig, &act, &old) != 0)
		return SIG_ERR;
	return old.sa_handler;
}

/* glibc's signal() has BSD semantics: restart, the signal blocked in its
 * handler, the handler kept. */
SDP_EXPORT sighandler_t signal(int sig, sighandler_t h) { return sdp_signal_with(sig, h, SA_RESTART, 1); }
SDP_EXPORT sighandler_t bsd_signal(int sig, sighandler_t h) { return sdp_signal_with(sig, h, SA_RESTART, 1); }
/* System V: one shot, not blocked in its handler, no restart. */
SDP_EXPORT sighandler_t sysv_signal(int sig, sighandler_t h)
{
	return sdp_signal_with(sig, h, SA_RESETHAND | SA_NODEFER, 0);
}
