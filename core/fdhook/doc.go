// Package fdhook tells the program which long-lived file descriptors the
// core holds (providers' memfds, eventfds and sockets, transports'
// doorbell and kick eventfds), so that a shim sharing the descriptor table
// with code that closes descriptors it does not know can keep them out of
// its reach. Every core package that opens or closes such a descriptor
// reports it here (NoteFDs, CloseFD, NoteClosing); the shim installs the
// hook (SetFDHook). It imports nothing of sdpshim.
package fdhook
