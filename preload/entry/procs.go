package main

import (
	"os"
	"runtime"
)

// spareP gives the core's runtime one P more than the CPUs, unless the
// program's environment sets GOMAXPROCS.
//
// Most of the core's Go code runs on the program's own threads, entered
// through a callback; when the callback returns, the thread keeps its P
// in a system call's state while it goes on in C (and often sleeps
// there), until sysmon takes the P back. With as many Ps as CPUs, a
// goroutine of the core's own (the rendezvous server answering a PULL,
// the reaper) that runs while a program thread holds a P that way leaves
// no P idle, so sysmon takes that P back at its next tick and starts
// its 20 us ticks again; with one P spare, the P stays with the thread
// and sysmon slows down. docs/direct.md ("What is not done yet", a
// pre-fork server's setup) has what it saved, and what it did not cost.
func spareP() {
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		return
	}
	runtime.GOMAXPROCS(runtime.NumCPU() + 1)
}
