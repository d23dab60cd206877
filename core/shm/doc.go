// Package shm is sdpshim's intra-host provider: a software "NIC" that
// implements verbs.Provider over shared memory between processes (or between
// two Providers of one process) on one host. Open returns a *Provider.
//
// Memory regions. A Region is a memfd (MFD_CLOEXEC, sealed against shrink
// and grow) mapped MAP_SHARED, its size rounded up to a page. Its local and
// remote keys are the same small id (the remote key is zero without remote
// access) and RemoteRegion.Addr is 0, so remote addresses are offsets. A
// Provider is one protection domain: a region with remote access is
// pushed, as its memfd, to the peer of every queue pair of that provider,
// and of no other provider, over that queue pair's side channel before
// RegisterRegion returns (a peer naming any other key, guessed or stale,
// gets StatusRemoteAccess); Region.Close pushes its removal the same way. A
// side channel holds a few hundred announcements; beyond that (a peer that
// has not connected yet) they wait in a backlog that the NIC goroutine
// flushes, and a peer request naming a key still in transit waits for it
// (at most two seconds, then StatusRemoteAccess). RegisterRegion never
// blocks.
//
// Queue pairs. Each queue pair owns a control area (control.go): a sealed
// memfd holding the ring of messages its peer sends it and the words that
// order that ring, plus an eventfd that wakes it and a SOCK_SEQPACKET unix
// socket pair for region announcements and peer-death detection. The
// Endpoint carries a versioned description (endpoint.go) and three files:
// the control memfd, a duplicate of the eventfd and one end of the socket
// pair. Endpoint files stay owned by the queue pair until Close; Connect
// takes ownership of the files it receives. When both queue pairs live in
// one process and an Endpoint is passed to Connect as returned by
// LocalEndpoint (same descriptor numbers, no socket in between), Connect
// takes the files over from the peer queue pair instead of sharing them.
//
// Execution. One-sided operations (WRITE, READ and WRITE_WITH_IMM's data)
// run synchronously on the posting goroutine when nothing is in flight: a
// copy into or out of the peer's mapping, a 1/2/4/8-byte aligned transfer
// being one atomic access. SEND and the receive side of WRITE_WITH_IMM are
// records in the peer's inbound ring; a small software-NIC goroutine per
// connected queue pair (nic.go) matches arriving records to posted RECVs
// in order, acknowledges each at once, completes the sender's requests
// when acknowledged, and executes requests that had to wait. A WRITE or
// WRITE_WITH_IMM posted behind records the peer has not consumed yet is
// carried by the ring (data and all, up to MaxMessageSize) and executed by
// the peer's NIC goroutine when it reaches it, after the records before it
// (RC ordering) and checked against the peer's own regions, so the sender
// never waits for a round trip there; a READ, or a larger WRITE, waits for
// the acknowledgement of what is in flight, as do all requests while the
// peer has not connected. A goroutine that polls a completion queue and
// finds it empty consumes the inbound rings and takes the acknowledgements
// of the queue pairs using it itself (when no one else is doing so), so
// completions do not wait for a NIC goroutine to be scheduled. The NIC
// goroutine sleeps in epoll when idle;
// peers ring each other's eventfd only when the sleeper has armed a flag
// in shared memory.
//
// Descriptors. Every descriptor the provider creates or takes over is
// reported to the process's fdhook.FDHook when it appears and before it is
// closed (the shim keeps them out of the host program's reach).
//
// Trust. Everything read from shared memory or from the side channel is
// validated; a peer that writes garbage moves the queue pair to QPError and
// flushes its work, it cannot make this process crash or hang. Received
// memfds must carry F_SEAL_SHRINK so the peer cannot truncate mapped pages.
//
// Limits. QPConfig zero values mean MaxSend 128, MaxRecv 128, MaxInline 64,
// MaxSGE 1; maxima are 8192 requests, 1024 inline bytes and 16 SGEs. A SEND
// carries at most MaxMessageSize bytes; a larger one completes with
// StatusLocalLength.
package shm
