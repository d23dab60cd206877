/*
 * direct.pml - a SPIN (Promela) model of the wait/wake protocol of the
 * direct data path (preload/c/direct.c): one direction of an area, its
 * sender and its receiver, the receiver's waits for data and the sender's
 * waits for space, as futex sleeps or as armed event waits. An armed
 * wait's ring is modelled as an eventfd write; the C code makes it as a
 * write of the sleeper's bell or as a byte on the TCP socket the sleeper
 * waits on (docs/direct.md): either leaves the sleeper's wait readable
 * until it looks, which is all the model relies on.
 * model_test.go runs it; doc.go says what it shows and what it leaves out.
 *
 * Memory model. Every shared access below is one atomic step and steps
 * interleave: sequential consistency. The C code is not sequentially
 * consistent as a whole (status bytes are written with release and read
 * with acquire, sleepers are read relaxed), but both sides of every
 * Dekker pair are separated by a SEQ_CST fence exactly where it matters:
 *   waiter:    fetch_add(sleepers) / store(armed, 1); FENCE; load(status)
 *   publisher: store(status);                          FENCE; load(sleepers) / load(armed)
 * and C11 (SC fences, [atomics.fences]) forbids both loads from reading
 * the value before the other side's store; that is the only reordering a
 * lost wakeup needs, so SC here is the assumption the C fences buy. The
 * futex word is read with a SEQ_CST load after the fence, and bumped with a
 * SEQ_CST fetch_add before FUTEX_WAKE. Dropping a fence cannot be written
 * under SC, but what it would allow can: without the waiter's fence its
 * re-check may read status before its announce is visible (BROKEN=1, the
 * look before the announce), without the publisher's its look at sleepers
 * may read before its status store is visible (BROKEN=3, the look before
 * the publish).
 *
 * Futexes are kernel semantics: FUTEX_WAIT(word, v) compares word with v
 * and queues the caller in one atomic step (the kernel does both under the
 * hash bucket's lock), returning at once if they differ; FUTEX_WAKE(word,
 * all) dequeues every waiter queued on word. There is no spurious return
 * (signals, EINTR): a spurious return only helps, and allowing it would
 * hide every lost wakeup from the deadlock check.
 *
 * Knobs (spin -DNAME=VALUE):
 *   N        blocks in the ring (a power of two as in the C code), default 2
 *   M        blocks the sender sends in all, default 3
 *   LMAX     blocks one send call may carry (1 or 2), default 2
 *   RX_EVENT 1: the receiver waits as an epoll loop does: a nonblocking
 *            recv, then arm (data_armed = 1, fence, poll), then epoll_wait
 *            on its eventfd; 0 (default): blocking recv with futex sleeps;
 *            2: as 1, with the entry's rest (shim/epoll.go collectAt): a
 *            scan that armed and found nothing leaves the entry quiet, and
 *            later scans skip it (without arming) while the generation
 *            (what was published, the FIN, the reset) stays and no ring
 *            of the eventfd came
 *   BELL     1 (needs RX_EVENT=2): the ring is the set's bell, which names
 *            no entry, so it does not end the rest; a scan skips a quiet
 *            entry only while its arm word is still set (armHeldLocked)
 *            3: two threads of one epoll set the interposer answers
 *            (preload/c/epollfast.c), both reading the connection, with
 *            parking: a scan may park the entry it finds not ready (mark
 *            parked, arm it to ring the socket, look again: unpark if
 *            ready); parked entries are left out of scans and of the arms
 *            before a sleep; a thread woken by the socket's ring (its
 *            token in the kernel's answer, one thread per ring: an edge)
 *            unparks it; either thread may take any ring
 *   WRAP     1: the sender may link any block it fills to any free block
 *            other than it (SDP_DBLK_NEXT: the block the receiver reads
 *            next), a free choice at every fill, standing for every rule
 *            of where to link (direct.c, link_of: the lowest free); the
 *            receiver follows the link. 0 (default): the next in the ring
 *   TX_EVENT the same for the sender's waits for space (space_armed)
 *   DETACH   1: the receiver's process detaches the handle at any moment
 *            (the core's Conn.Detach at a close: closed = 1, then
 *            sdp_dconn_wake_mine, which wakes the words only while this
 *            process's own count of announced sleepers, sleeping, is not
 *            0); a receiver that sees closed (at a call's start, after
 *            its announce, after its sleep) hands the call to the core,
 *            which closes the reading end. The sender then waits for that
 *            end instead of sending its FIN, so that only the detach's
 *            wake can end a receiver's sleep. Futex receiver only.
 *   RX2      1: two threads read the connection with blocking recv calls
 *            (futex sleeps on the one data word), serialised by the receive
 *            lock; each ends at the EOF. Needs RX_EVENT=0, DETACH=0, ENDS=0.
 *            It checks the woken flag with two sleepers on one word.
 *   ENDS     1 (default): the sender may also reset (RST) between calls and
 *            the receiver may close its reading end early (EPIPE, a wake of
 *            the sender's space sleep); 0: only the FIN after M blocks
 *   BROKEN   0 (default): the protocol as in direct.c. Deliberate bugs,
 *            each of which must make the checker fail:
 *            1  the receiver checks for data BEFORE announcing its sleep
 *               (look, announce, sleep: no re-check after the announce)
 *            2  the receiver reads the futex value v AFTER its re-check
 *            3  the sender looks for sleepers BEFORE publishing the status
 *               byte (its wake precedes the store it should announce)
 *            4  the event receiver polls BEFORE arming (needs RX_EVENT=1)
 *            5  the sender checks for room BEFORE announcing its sleep for
 *               space (the space direction's version of 1)
 *            6  a ring of the eventfd does not end a quiet entry's rest
 *               (needs RX_EVENT=2): a ring meant for a block already read
 *               spends the arm of the scan after it, and the entry rests
 *               unarmed
 *            7  a budget poll that finds nothing leaves the entry quiet
 *               without arming it (needs RX_EVENT=2)
 *            8  parking arms and looks before it marks the entry parked
 *               (needs RX_EVENT=3): the other thread can take the ring's
 *               token in between, and the mark then outlives the spent arm
 *            9  the socket's ring does not unpark the entry (needs
 *               RX_EVENT=3)
 *            11 the receiver does not look at closed between its
 *               announce and its sleep (needs DETACH=1): a detach that
 *               counted no sleeper leaves it asleep
 *            12 a scan skips a quiet entry without looking at its arm
 *               word (needs RX_EVENT=2, BELL=1): a ring of the bell meant
 *               for a block already read spends the arm of the scan after
 *               it, as in 6
 *            13 a sleeper clears the woken flag BEFORE it reads the futex
 *               value (needs RX2=1): a wake whose bump it read was already
 *               flagged, so a later publish that its re-check missed (the
 *               other reader took the earlier block) wakes nobody
 *            14 a sleeper never clears the woken flag: after the first
 *               wake, no publish wakes anybody
 *            15 a reader ignores the link (needs WRAP=1): it looks for
 *               the next block where the sender never put it
 *            10 a reader frees a block before it moves the read cursor
 *               past it (needs RX_EVENT=3): the other thread's look finds
 *               the cursor on a freed block and misses one published
 *               behind it before its arm
 *
 * Properties:
 *   safety   no invalid end state: every legitimate end of a process is
 *            its last line (so no end labels are needed), and one blocked
 *            in FUTEX_WAIT or epoll_wait with nothing left to wake it is a
 *            deadlock pan reports (a lost wakeup). The sender may wait for
 *            the answer to what it sent, as a request/response application
 *            does, so that a publish nobody notices is a deadlock and not
 *            only a stall until the next publish or the FIN. Assertions:
 *            blocks arrive in order, none lost or repeated, the EOF comes
 *            after exactly the M blocks, at most one sleeper is counted.
 *   liveness ltl "done": every run ends with both processes finished
 *            (pan -a; all loops of the model are bounded, so no fairness
 *            is needed: a run that spins or blocks for ever is a cycle).
 */

#ifndef N
#define N 2
#endif
#ifndef M
#define M 3
#endif
#ifndef LMAX
#define LMAX 2
#endif
#ifndef RX_EVENT
#define RX_EVENT 0
#endif
#ifndef TX_EVENT
#define TX_EVENT 0
#endif
#ifndef ENDS
#define ENDS 1
#endif
#ifndef BROKEN
#define BROKEN 0
#endif
#ifndef BELL
#define BELL 0
#endif
#if BELL && BROKEN != 12
#define ARM_HELD (data_armed != 0)
#else
#define ARM_HELD 1
#endif
#ifndef DETACH
#define DETACH 0
#endif
#ifndef WRAP
#define WRAP 0
#endif
#ifndef RX2
#define RX2 0
#endif
#if RX2 && (RX_EVENT || DETACH || ENDS)
#error RX2 needs RX_EVENT=0, DETACH=0 and ENDS=0
#endif

#define EMPTY 0
#define DATA  1

/* The direction's shared words (struct sdp_ddir, the status bytes and the
 * blocks). A block's header and payload are stood for by its seq. */
byte status[N];      /* SDP_DBLK_EMPTY / SDP_DBLK_DATA */
byte blkseq[N];      /* the header's seq: what the block carries */
byte blknext[N];     /* the header's link: the next block's position, or N: the next in the ring */
byte tx_next;        /* sender's cursor (free-running; index tx_next % N) */
byte tx_seq;
byte rx_next;        /* receiver's cursor */
byte rx_seq;
bit  fin;
byte fin_seq;
bit  reset;
bit  rx_closed;
byte data_sleepers;  /* the receiver waiting for data */
byte data_word;
byte data_armed;     /* 0: none; 1: the sleeper's bell (an eventfd); 2: a
		      * ring on the socket (two arms with different bells
		      * merge into the socket's, direct.c merge_bell) */
byte space_sleepers; /* the sender waiting for space */
bit  closed;         /* DETACH: the receiver's handle is detached */
byte sleeping;       /* DETACH: the receiver process's own count of its
		      * announced sleepers (struct sdp_dconn, not the area) */
byte space_word;
bit  space_armed;
bit  data_woken;     /* 1: the data sleepers were woken since the last announced */
bit  space_woken;

/* The kernel: who is queued on which futex word, and the eventfds. */
bit  rx_queued;      /* the receiver sleeps in FUTEX_WAIT(data_word) */
byte rx_wakes;       /* RX2: FUTEX_WAKEs of data_word (each dequeues every waiter) */
bit  tx_queued;      /* the sender sleeps in FUTEX_WAIT(space_word) */
bit  rx_efd;         /* the receiver's eventfd is readable (my_efd) */
bit  sock_ring;      /* RX_EVENT=3: a ring on the socket, its token not taken yet */
bit  parked;         /* RX_EVENT=3: the set's entry for the connection */
bit  rx_lock;        /* RX_EVENT=3: the receive lock (recv_locked) */
bit  stop;           /* RX_EVENT=3: a thread saw the end; the other leaves too */
byte rx_ends;        /* RX_EVENT=3: threads that left */
bit  tx_efd;         /* the sender's eventfd is readable */
byte tx_wakes;       /* FUTEX_WAKEs of space_word (observation only) */

/* Observation only. */
byte got;            /* blocks the receiver took */
bit  tx_end;
bit  rx_end;

/* FUTEX_WAIT(word, v): compare and queue in one step, then block while
 * queued. */
inline futex_wait(word, v, queued) {
	atomic { if :: word == v -> queued = 1 :: else -> skip fi };
	(queued == 0)
}

/* wake_word(): FENCE (a no-op under SC); if sleepers and
 * exchange(woken, 1) was 0: fetch_add(word, 1), FUTEX_WAKE(word, all);
 * if armed && exchange(armed, 0): write the peer's eventfd. */
inline wake_word(sleepers, word, queued, wakes, woken, armed, efd, t) {
	if
	:: sleepers != 0 ->
		atomic { t = woken; woken = 1 };
		if
		:: t == 0 ->
			word++;
			atomic { queued = 0; wakes++ }
		:: else -> skip
		fi
	:: else -> skip
	fi;
	if
	:: armed != 0 ->
		atomic { t = armed; armed = 0 };
		if
		:: t == 1 -> efd = 1
		:: t == 2 -> sock_ring = 1
		:: else -> skip
		fi
	:: else -> skip
	fi
}

/* sdp_dconn_arm(bell): merge_bell, the same bell or none: that bell; a
 * different one: the socket (2). */
inline arm_data(b) {
	atomic {
		if
		:: data_armed == 0 || data_armed == b -> data_armed = b
		:: else -> data_armed = 2
		fi
	}
}

inline wake_data(t)  { wake_word(data_sleepers, data_word, rx_queued, rx_wakes, data_woken, data_armed, rx_efd, t) }
inline wake_space(t) { wake_word(space_sleepers, space_word, tx_queued, tx_wakes, space_woken, space_armed, tx_efd, t) }

/* announce()'s end: the woken flag cleared after the futex value was
 * read, before the re-check (BROKEN 13 clears it before the read; 14
 * never). */
#if BROKEN == 14
#define CLEAR_WOKEN(w) skip
#else
#define CLEAR_WOKEN(w) w = 0
#endif

/* withdraw(): a CAS loop that never goes below 0. */
inline withdraw(sleepers) {
	atomic { if :: sleepers > 0 -> sleepers-- :: else -> skip fi }
}

/* What the receiver's polls and re-checks test: recv_ready() || fin ||
 * reset (recv_end() != 1). */
/* The block after cursor i (next_index in direct.c): the linked one, in
 * the ring's next lap. A reader that ignores the link (BROKEN=15) goes on
 * to the next in the ring. */
#if BROKEN == 15
#define AFTER(i) ((i) + 1)
#else
#define AFTER(i) (blknext[(i) % N] < N -> ((i) - (i) % N + N + blknext[(i) % N]) : ((i) + 1))
#endif

#define RX_READY (status[rx_next % N] == DATA || fin || reset)
/* The generation a quiet entry is skipped by (core/direct Conn.Gen). */
#define RX_GEN (tx_seq + 8 * fin + 16 * reset)
/* The sender's: send_room() || send_blocked(). */
#define TX_READY (status[tx_next % N] != DATA || rx_closed || reset)

proctype Sender()
{
	byte want, moved, v, j;
	byte t;
	bit round;

call:	/* sdp_dconn_send_all of the next want blocks, or the end */
	if
	:: tx_seq == M -> goto finish
	:: else -> skip
	fi;
#if ENDS
	if
	:: skip
	:: goto abort  /* an abortive close between calls */
	fi;
#endif
	if
	:: want = 1
	:: (LMAX >= 2 && M - tx_seq >= 2) -> want = 2
	fi;

start:	/* one sdp_dconn_send call: send_blocked() first */
	round = 0;
	if
	:: rx_closed -> goto epipe
	:: else -> skip
	fi;
again:	/* send_locked(): fill free blocks, the status byte last */
	moved = 0;
	do
	:: moved < want && status[tx_next % N] == EMPTY ->
		blkseq[tx_next % N] = tx_seq;
		blknext[tx_next % N] = N;
#if WRAP
		select(j : 0 .. N - 1);
		if
		:: j != tx_next % N && status[j] == EMPTY -> blknext[tx_next % N] = j
		:: else -> skip
		fi;
#endif
#if BROKEN == 3
		wake_data(t);  /* BUG: looks before the publish below */
#endif
		status[tx_next % N] = DATA;
		tx_next = (blknext[tx_next % N] < N -> (tx_next - tx_next % N + N + blknext[tx_next % N]) : (tx_next + 1));
		tx_seq++;
		moved++
	:: else -> break
	od;
	if
	:: moved > 0 ->
#if BROKEN != 3
		wake_data(t);
#endif
		want = want - moved;
		if
		:: want > 0 -> goto start
		:: else -> skip
		fi;
		/* The application may wait for the answer to what it sent (a
		 * request/response exchange; the answer comes the other way,
		 * which is this model mirrored, abstracted to "the receiver
		 * has taken it all"). A block published but never noticed is
		 * then a deadlock, not just a stall until the next wake. */
		if
		:: skip
		:: true ->  /* chosen first, then blocks until the answer */
			(got == tx_seq || rx_closed)
		fi;
		goto call
	:: else -> skip
	fi;
	if
	:: rx_closed -> goto epipe
	:: else -> skip
	fi;
#if TX_EVENT
	/* -EAGAIN; the event loop arms POLLOUT, polls, sleeps on its eventfd. */
	space_armed = 1;
	if
	:: TX_READY -> goto start
	:: else -> skip
	fi;
	(tx_efd == 1);
	tx_efd = 0;
	goto start;
#else
	if
	:: round == 0 ->
		round = 1;
		/* POLL_UNTIL: a bounded budget of looks (here 0 or 1). */
		if
		:: skip
		:: TX_READY -> goto again
		fi;
#if BROKEN == 5
		if
		:: TX_READY -> goto again  /* BUG: the look before the announce */
		:: else -> skip
		fi;
		space_sleepers++;
		v = space_word;
		space_woken = 0;
#else
		/* announce(): fetch_add(sleepers); FENCE; v = load(word);
		 * woken = 0. */
		space_sleepers++;
		v = space_word;
		CLEAR_WOKEN(space_woken);
		if
		:: TX_READY ->
			withdraw(space_sleepers);  /* room came while announcing */
			goto again
		:: else -> skip
		fi;
#endif
		assert(space_sleepers <= 1);
		/* SDP_D_WAIT: sleep_on(), then sdp_dconn_woke(). */
		futex_wait(space_word, v, tx_queued);
		withdraw(space_sleepers);
		goto start
	:: else ->
		goto again  /* room seen but taken by a sibling: go round again */
	fi;
#endif

finish:	/* sdp_dconn_fin(): fin_seq, fin, then the wake */
#if DETACH
	(rx_closed);  /* the receiver's end: only its detach comes now */
	goto epipe;
#endif
	fin_seq = tx_seq;
	fin = 1;
	wake_data(t);
	goto out;
abort:	/* sdp_dconn_reset(): reset, then wake the peer's reader (and writer,
	 * which is the other direction's and not modelled) */
	reset = 1;
	wake_data(t);
	goto out;
epipe:	/* the receiver closed its reading end */
	skip;
out:
	tx_end = 1
}

#if RX_EVENT != 3 && !RX2
proctype Receiver()
{
	byte v, k, g, qgen, t, at;
	bit polled, quiet;

call:	/* one sdp_dconn_recv call (sdp_dconn_recv_wait without WAITALL) */
#if DETACH
	if
	:: closed -> goto detached  /* sdp_direct_get: the core's call */
	:: else -> skip
	fi;
#endif
#if ENDS
	if
	:: skip
	:: (got > 0) ->
		/* sdp_dconn_close_rx(): the reading end closes early. */
		rx_closed = 1;
		wake_space(t);
		goto out
	fi;
#endif
	polled = 0;
loop:	/* recv_locked(): take the blocks that have arrived, free each one */
	k = 0;
	do
	:: k < N && status[rx_next % N] == DATA ->
		assert(blkseq[rx_next % N] == rx_seq);  /* in order, none lost or repeated */
		at = rx_next;
		rx_next = AFTER(rx_next);
		status[at % N] = EMPTY;
		rx_seq++;
		got++;
		k++
	:: k > 0 -> break  /* the caller's buffer is full */
	:: else -> break
	od;
	if
	:: k > 0 ->
		wake_space(t);  /* if (freed) wake_space() */
		goto call       /* the call returns what it read */
	:: else -> skip
	fi;
	/* recv_end(): reset, then fin (a block before the FIN is read first). */
	if
	:: reset -> goto econnreset
	:: else -> skip
	fi;
	if
	:: fin ->
		if
		:: status[rx_next % N] == DATA -> goto loop
		:: else ->
			assert(fin_seq == rx_seq);
			goto eof
		fi
	:: else -> skip
	fi;
#if RX_EVENT == 2
	/* -EAGAIN; the event loop's next epoll_wait: scans of its set, then
	 * a kernel sleep. A scan reads the generation, then, unless the entry
	 * rests quiet at that generation, evaluates it; a budget poll stops
	 * there, the exact scan before the sleep arms and polls again. */
	g = RX_GEN;
	if
	:: quiet && qgen == g && ARM_HELD -> skip  /* skipped: not evaluated, not armed */
	:: else ->
#if BROKEN == 7
		if
		:: skip
		:: !RX_READY -> quiet = 1; qgen = g  /* BUG: quiet, unarmed */
		fi;
		if
		:: quiet && qgen == g -> goto sleep
		:: else -> skip
		fi;
#endif
		data_armed = 1;
		if
		:: RX_READY -> quiet = 0; goto call
		:: else -> skip
		fi;
		quiet = 1;
		qgen = g
	fi;
sleep:
	(rx_efd == 1);
	rx_efd = 0;
#if BROKEN != 6 && !BELL
	quiet = 0;  /* filter(): our token came back, the ring spent the arm */
#endif
	goto call;
#elif RX_EVENT
	/* -EAGAIN; the event loop arms POLLIN (sdp_dconn_arm), polls, and
	 * sleeps in epoll_wait until its eventfd is readable, reads it. */
#if BROKEN == 4
	if
	:: RX_READY -> goto call  /* BUG: the poll before the arm */
	:: else -> skip
	fi;
	data_armed = 1;
#else
	data_armed = 1;
	if
	:: RX_READY -> goto call
	:: else -> skip
	fi;
#endif
	(rx_efd == 1);
	rx_efd = 0;
	goto call;
#else
	if
	:: !polled ->
		polled = 1;
		/* POLL_UNTIL: a bounded budget of looks (here 0 or 1). */
		if
		:: skip
		:: RX_READY -> goto loop
		fi
	:: else -> skip
	fi;
#if BROKEN == 1
	if
	:: RX_READY -> goto loop  /* BUG: the look before the announce */
	:: else -> skip
	fi;
	data_sleepers++;
	v = data_word;
	data_woken = 0;
#elif BROKEN == 2
	data_sleepers++;
	if
	:: RX_READY ->
		withdraw(data_sleepers);
		goto loop
	:: else -> skip
	fi;
	v = data_word;  /* BUG: the futex value read after the re-check */
	data_woken = 0;
#else
	/* announce(): fetch_add(sleeping); fetch_add(sleepers); FENCE;
	 * v = load(word); woken = 0; re-check. */
	sleeping++;
	data_sleepers++;
	v = data_word;
	CLEAR_WOKEN(data_woken);
	if
	:: RX_READY ->
		withdraw(data_sleepers);  /* data came while announcing */
		withdraw(sleeping);
		goto loop
	:: else -> skip
	fi;
#endif
	assert(data_sleepers <= 1);
#if DETACH && BROKEN != 11
	/* direct_io: closed, looked at after the announce. */
	if
	:: closed ->
		withdraw(data_sleepers);
		withdraw(sleeping);
		goto detached
	:: else -> skip
	fi;
#endif
	/* SDP_D_WAIT: sleep_on(), then sdp_dconn_woke(), then call again. */
	futex_wait(data_word, v, rx_queued);
	withdraw(data_sleepers);
	withdraw(sleeping);
	goto call;
#endif

eof:	/* 0: the FIN, after every block sent */
	assert(got == M && !reset);
	goto out;
econnreset:
	assert(got <= M);
#if DETACH
	goto out;
detached:	/* the core's call: it closes the reading end */
	rx_closed = 1;
	wake_space(t);
#endif
out:
	rx_end = 1
}
#endif

#if RX2
/* One of two threads making blocking recv calls on the connection: under
 * the receive lock it takes what arrived (the cursor past each block, then
 * the block freed, as recv_locked) or finds the EOF; otherwise it polls,
 * announces, re-checks and sleeps on the data word. FUTEX_WAIT queues it
 * (compare and queue in one step) until a FUTEX_WAKE of the word after
 * that: rx_wakes counts them. */
proctype FutexReader()
{
	byte k, t, v, w, at;
	bit q;
take:	/* recv_locked(), then recv_end() */
	atomic { rx_lock == 0 -> rx_lock = 1 };
	k = 0;
	do
	:: k < N && status[rx_next % N] == DATA ->
		assert(blkseq[rx_next % N] == rx_seq);  /* in order, none lost or repeated */
		got++;
		k++;
		rx_seq++;
		at = rx_next;
		rx_next = AFTER(rx_next);
		status[at % N] = EMPTY
	:: else -> break
	od;
	if
	:: k > 0 -> rx_lock = 0; wake_space(t); goto take
	:: else -> skip
	fi;
	if
	:: fin && status[rx_next % N] != DATA ->
		assert(fin_seq == rx_seq && got == M);
		rx_lock = 0;
		goto out
	:: else -> skip
	fi;
	rx_lock = 0;
	/* POLL_UNTIL: a bounded budget of looks (here 0 or 1). */
	if
	:: skip
	:: RX_READY -> goto take
	fi;
	/* announce(), then the re-check. */
	data_sleepers++;
#if BROKEN == 13
	data_woken = 0;  /* BUG: cleared before the value is read */
	v = data_word;
#else
	v = data_word;
	CLEAR_WOKEN(data_woken);
#endif
	if
	:: RX_READY ->
		withdraw(data_sleepers);
		goto take
	:: else -> skip
	fi;
	assert(data_sleepers <= 2);
	/* FUTEX_WAIT(data_word, v) */
	atomic {
		if
		:: data_word == v -> q = 1; w = rx_wakes
		:: else -> q = 0
		fi
	};
	if
	:: q -> (rx_wakes != w)
	:: else -> skip
	fi;
	withdraw(data_sleepers);
	goto take;
out:
	atomic {
		rx_ends++;
		if :: rx_ends == 2 -> rx_end = 1 :: else -> skip fi
	}
}
#endif
#if DETACH
/* Conn.Detach: closed (SEQ_CST), then sdp_dconn_wake_mine: FENCE; if
 * sleeping: bump the words and wake them. */
proctype Detacher()
{
	closed = 1;
	if
	:: sleeping != 0 ->
		data_word++;
		rx_queued = 0
	:: else -> skip
	fi
}
#endif

#if RX_EVENT == 3
/* One thread of an epoll set the interposer answers (epollfast.c): its
 * waits scan the set's one entry unless parked (parking it when it finds
 * it not ready: sdp_es_park), arm it before a sleep unless parked
 * (sdp_es_arm), sleep in the kernel's epoll_wait until the set's bell
 * (rx_efd) or the socket's ring (sock_ring, whose token unparks the
 * entry: sdp_es_filter) comes, one thread per edge; it reads what a
 * ready entry holds (a nonblocking recv under the receive lock). */
proctype SetThread()
{
	byte k, t, at;

look:	/* a wait's scan */
	if
	:: stop -> goto out
	:: else -> skip
	fi;
	if
	:: !parked ->
		if
		:: RX_READY -> goto take
		:: else -> skip
		fi;
		/* Not ready: idle for SDP_ES_PARK_AFTER waits and 2 ms, or not yet. */
		if
		:: skip
		:: true ->
#if BROKEN == 8
			arm_data(2);
			if
			:: RX_READY -> goto take
			:: else -> skip
			fi;
			parked = 1  /* BUG: marked after the arm and the look */
#else
			parked = 1;  /* mark, arm, look again */
			arm_data(2);
			if
			:: RX_READY -> parked = 0
			:: else -> skip
			fi
#endif
		fi
	:: else -> skip
	fi;
	/* Before the sleep: arm the unparked entry with the set's bell, look. */
	if
	:: !parked ->
		arm_data(1);
		if
		:: RX_READY -> goto take
		:: else -> skip
		fi
	:: else -> skip
	fi;
	/* epoll_wait: one thread per edge. */
	atomic {
		(rx_efd == 1 || sock_ring == 1 || stop);
		if
		:: sock_ring == 1 ->
			sock_ring = 0;
#if BROKEN != 9
			parked = 0  /* the entry's token unparks it */
#else
			skip
#endif
		:: sock_ring == 0 && rx_efd == 1 -> rx_efd = 0
		:: else -> skip
		fi
	};
	goto look;

take:	/* a nonblocking recv: recv_locked under the receive lock */
	atomic { rx_lock == 0 -> rx_lock = 1 };
	k = 0;
	do
	:: k < N && status[rx_next % N] == DATA ->
		assert(blkseq[rx_next % N] == rx_seq);  /* in order, none lost or repeated */
		got++;
		k++;
#if BROKEN == 10
		status[rx_next % N] = EMPTY;  /* BUG: freed before the cursor moves */
		rx_seq++;
		rx_next = AFTER(rx_next)
#else
		/* The cursor past the block, then the block freed: a look (one
		 * atomic step here, a read of the cursor again after the status
		 * bytes in recv_ready) sees the block being read or the cursor
		 * past it. */
		rx_seq++;
		at = rx_next;
		rx_next = AFTER(rx_next);
		status[at % N] = EMPTY
#endif
	:: else -> break
	od;
	if
	:: k > 0 -> rx_lock = 0; wake_space(t); goto look
	:: else -> skip
	fi;
	/* recv_end(), here under the lock: the cursor it reads is one the
	 * C code stores once per recv_locked, not per block as here. */
	if
	:: reset -> rx_lock = 0; stop = 1; goto out
	:: else -> skip
	fi;
	if
	:: fin && status[rx_next % N] != DATA ->
		assert(fin_seq == rx_seq && got == M);
		rx_lock = 0;
		stop = 1;
		goto out
	:: else -> skip
	fi;
	rx_lock = 0;
	goto look;  /* the other thread took it */
out:
	atomic {
		rx_ends++;
		if :: rx_ends == 2 -> rx_end = 1 :: else -> skip fi
	}
}
#endif

init {
	atomic {
		run Sender();
#if RX_EVENT == 3
		run SetThread();
		run SetThread()
#elif RX2
		run FutexReader();
		run FutexReader()
#else
		run Receiver()
#endif
#if DETACH
		;run Detacher()
#endif
	}
}

/* Every run ends with both sides done: no lost wakeup, no livelock. */
ltl done { <> (tx_end && rx_end) }
