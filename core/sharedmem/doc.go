// Package sharedmem reads and writes memory that another process (or a
// NIC) writes too: byte loads, stores and compare-and-swaps that leave
// neighbouring bytes intact, atomic words at an offset, and a full fence.
// It is the bottom of the core and imports nothing of sdpshim.
package sharedmem
