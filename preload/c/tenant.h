/*
 * tenant.h - the tenant gate: stream-level preemption between processes
 * (seed 003, PeRF's QP-level preemption applied to the direct path's
 * streams). A tenant is a process. Where several processes of one user
 * send bulk data at once, a process may have at most as many bulk sends
 * copying at a time as the least of the others wants, so a process with
 * sixteen busy connections cannot take sixteen times the CPU of one with
 * a single connection; its other bulk senders wait their turn, and take
 * turns among themselves. docs/direct.md ("Tenants") has the rule and its
 * figures.
 *
 * The processes learn of each other from the board, a small file in the
 * run directory, one per user (the Go core creates it and writes its
 * header: core/direct/board.go). Each sending process keeps one entry in
 * it, its pid, how many of its streams want to send bulk data, and when it
 * last said so; entries older than 100 ms are of processes that stopped
 * sending (tenant.c). Its header also holds the starved mark: the pid of
 * the process whose small message was last late for the CPU, and when
 * (direct.c's preemption, for the user's other processes). The board is
 * read and written with pread and pwrite, never mapped: the entries at
 * most once a millisecond per sending process (every 10 ms while no
 * other process sends), the mark written at most every 5 ms and read
 * alone (sdp_tenant_peek) at most once a millisecond while another
 * process's mark is fresh, every 10 ms otherwise. Another process of the
 * user can write anything into it or truncate it, which at worst changes
 * how many turns this process takes and, with a fresh mark, pauses its
 * bulk sub-writes (each at most 2 ms); it never makes us read out of
 * bounds, crash or wait unbounded (every wait here is timed).
 */
#ifndef SDPSHIM_TENANT_H
#define SDPSHIM_TENANT_H

#include <stdint.h>

#define SDP_BOARD_MAGIC 0x42544453u /* "SDTB" little-endian */
#define SDP_BOARD_VERSION 1u
#define SDP_BOARD_ENTRIES 128

/* A process's entry. */
struct sdp_board_entry {
	uint32_t pid;    /* 0: free */
	uint32_t demand; /* its streams that want to send bulk data (holding a turn or waiting) */
	int64_t beat_ns; /* CLOCK_MONOTONIC when it last wrote the entry */
};

/* The board file: a header, then the entries. */
struct sdp_board {
	uint32_t magic, version;
	uint32_t entries;     /* SDP_BOARD_ENTRIES */
	uint32_t starved_pid; /* the process whose small message was last late (direct.c, preemption); 0: none yet */
	int64_t starved_ns;   /* when it last said so, CLOCK_MONOTONIC */
	uint32_t pad[10];
	struct sdp_board_entry entry[SDP_BOARD_ENTRIES];
};

struct sdp_dconn;

/* Before a blocking bulk sub-write on c (with preemption on): returns
 * once c holds a turn, with how many times it waited for one (0 on the
 * fast path: c holds a turn that is not over, or no other process sends
 * bulk data and a turn was free). Async-signal-safe; raw system calls. */
uint32_t sdp_tenant_enter(struct sdp_dconn *c);

/* A small message of this process was late at now (direct.c's starved
 * mark): says so on the board fd (given to process fd_pid: none unless
 * that is this process), at most every 5 ms, so that the bulk sends of
 * the user's other processes give way too. Async-signal-safe; keeps
 * errno. */
void sdp_tenant_starved(int fd, uint32_t fd_pid, int64_t now);

/* Whether another process of the user said a small message of its was
 * late within window ns before now, as this process's last look at the
 * board (or peek) read it. Another process may write anything there: a
 * mark from the future, or none, is not. */
int sdp_tenant_starved_within(int64_t now, int64_t window);

/* Reads the board's starved mark alone through fd (given to process
 * fd_pid) for sdp_tenant_starved_within, when neither a look nor a peek
 * read it within a millisecond while another process's mark was fresh,
 * 10 ms otherwise: for a bulk sender's scheduling point, whether it
 * takes turns (and so looks) or not (a send timeout, the shared
 * channel). Keeps errno. */
void sdp_tenant_peek(int fd, uint32_t fd_pid, int64_t now);

/* In a fork child, before anything else: the parent's turns, waiters and
 * cap are not the child's (its one thread holds none of them). */
void sdp_tenant_forget(void);

/* What the gate of this copy of tenant.c holds now (tests): the cap, the
 * turns held and the threads waiting for one. */
void sdp_tenant_state(uint32_t *cap, uint32_t *held, uint32_t *waiting);

#endif
