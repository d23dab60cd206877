// doc.go - the package comment of tools/model.

// Package model model-checks the wait/wake protocol of the direct data
// path (preload/c/direct.c) with SPIN. It holds no Go code: its test
// (model_test.go) generates the verifier of direct.pml with spin, compiles
// it with gcc, runs it and reads its verdict, for the protocol and for
// deliberately broken variants of it.
//
// What the model is: one direction of an area, with N status-byte blocks
// (default 2), one sender that sends M blocks (default 3) in blocking send
// calls of one or two blocks, then a FIN (or, between calls, a reset), and
// one receiver that takes what has arrived in blocking recv calls (or
// closes its reading end early). Each side waits as direct.c does: a
// bounded poll, then announce (fetch_add on the sleepers count, fence,
// read the futex word), re-check, and FUTEX_WAIT on the word, then
// withdraw and call again; or, as an epoll loop does, arm (armed = 1,
// fence), poll, and sleep until its eventfd is written; or as the core's
// epoll sets do, whose scans skip a quiet entry (one that an exact scan
// armed and found idle) without arming it again until its generation
// moves or its eventfd rings (with BELL=1 the ring is the set's bell,
// which names no entry and ends no rest; a scan skips the entry only
// while its arm word is still set); or as two threads of one epoll set the
// interposer answers (preload/c/epollfast.c), both reading the
// connection, whose scans may park the entry (mark it parked, arm it to
// ring the socket, look again) and leave it out of scans and arms until a
// thread takes the socket's ring from the kernel (one thread per ring).
// With DETACH=1, the receiver's own process also detaches the handle at
// any moment (closed, then a wake only while its own count of announced
// sleepers is not 0), and the receiver looks at closed at a call's start,
// after its announcement and after its sleep. With RX2=1, two threads
// make blocking recv calls on the connection, serialised by the receive
// lock, and sleep on the one data word.
// The other side
// publishes (the status byte last), fences, looks at sleepers and armed,
// and, when it is the first to set the word's woken flag since a sleeper
// announced (the sleeper clears it after reading the futex value), bumps
// the word and wakes; or writes the eventfd. Both wait
// directions are in: the receiver waiting for data (data_sleepers,
// data_word, data_armed) and the sender waiting for space
// (space_sleepers, space_word, space_armed). The futex is the kernel's:
// FUTEX_WAIT compares and queues in one step, FUTEX_WAKE dequeues every
// waiter. Memory is sequentially consistent, which is what the SEQ_CST
// fences on both sides of each Dekker pair in direct.c provide for the
// accesses that matter (direct.pml's header gives the argument).
//
// What it shows, for each configuration the test runs (both futex and
// event waits on either side, one- and two-block rings, up to 4 blocks):
// no lost wakeup (no reachable state in which a process is blocked in
// FUTEX_WAIT or epoll_wait and nothing will wake it: pan's invalid end
// states, made sharp by letting the sender wait for the answer to what it
// sent, as a request/response application does, so that a missed wake is a
// deadlock and not only a stall until the next one), every block received
// once and in order, the EOF after exactly the blocks sent, at most one
// sleeper counted, and, as LTL, that every run ends with both sides done
// (no livelock: every loop of the model is bounded, so no fairness is
// assumed).
//
// That the checker is not vacuous: the test also runs fourteen broken
// variants (BROKEN=1..14 in direct.pml: look before announcing, read the
// futex value after the re-check, look for sleepers before publishing,
// poll before arming, the space direction's look before announcing, a
// quiet entry that a ring of its eventfd leaves quiet (a late ring, meant
// for a block already read, spends the arm of the scan after it), a
// budget poll that makes an entry quiet without arming it, parking that
// marks the entry after its arm and look (the other thread takes the
// ring in between), a ring that does not unpark, and a reader that frees
// a block before it moves the read cursor past it: the model found that
// one in the C code, where the other thread's look then missed a block
// published behind the freed ones; the reader now moves the cursor
// first, and a look reads the cursor again after the status bytes;
// a receiver that does not look at closed between its announcement
// and its sleep, which a detach that counted no sleeper leaves asleep;
// and, with bells, a scan that skips a quiet entry without looking at
// its arm word, which a late ring spent as in the sixth; a sleeper that
// clears the woken flag before it reads the futex value, which with two
// readers lets a flag set for an earlier wake swallow the wake of a
// publish the sleeper's re-check missed (the first form of the flag, found
// by this model); and a flag never cleared)
// and requires pan to find the lost wakeup in each as an invalid end
// state, and in two of them (a futex and an event one) also as a
// violation of the liveness claim; and for the real protocol it requires
// that the sleeps and wakes of the configuration are in the model and were
// executed (pan's list of unreached statements).
//
// What it leaves out: several senders on one side, and several receivers
// but in the parking and RX2 configurations (the side locks, the "room taken by a
// sibling" retry), several entries in a set, epoll_update and
// epoll_append (their generation and kick), appends to a published
// block and the claims that keep them from a read (an append is a
// publish here: the same fence and wake), fork children, RETAINED
// blocks, byte-granular reads (a block is taken whole, although a call
// may stop after any block), hostile peers and protocol violations, the
// adaptive budget (a poll is 0 or 1 looks), signals and timeouts
// (spurious futex returns only help), wrap-around of the 32-bit futex
// word (ABA after 2^32 wakes), the other direction (the mirror image of
// this one, with disjoint words; the eventfd a process shares between
// both directions' waits is modelled per direction), and any memory
// model weaker than the SC the fences provide.
package model
