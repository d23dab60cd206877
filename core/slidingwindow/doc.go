// Package slidingwindow is the sliding-window block transport, the
// baseline of the status-byte channel (docs/design.md, "Seed 000"): a
// wire.Transport written only against verbs.Provider, kept to measure what
// the status-byte design removes. It is not a wire.Retainer: the receiver
// frees space only in order, so one held block stops everything after it
// (head-of-line blocking).
//
// # Ring and pointers
//
// Per direction the receiver owns a ring of N blocks of S bytes (header
// included) in a region its peer may write. The sender keeps two counters:
// head, the blocks it has written, and tail, the blocks the receiver has
// released as of its last acknowledgement; block k lives in slot k mod N
// and may be written only while head-tail < N. It stages header and
// payload in its own registered copy of the slot and writes them with one
// WRITE_WITH_IMM, in ring order. The write consumes one of the receives
// the receiver keeps posted, so the receiver learns of arrivals from its
// receive completion queue, never by scanning memory. The immediate is
//
//	bits 0..19   payload length (the header's Len)
//	bits 20..30  block number k mod 2048
//	bit  31      full: this block leaves the sender no room (head-tail == N)
//
// # Release and acknowledgement
//
// Blocks may be released in any order, but the receiver's tail advances
// only over a run of released blocks from the oldest: an early release is
// held until everything before it is released. The receiver tells the
// sender its tail with an 8-byte SEND (kind 1, tail mod 2^32), coalesced:
// it acknowledges when ackEvery = max(1, N/4) blocks were freed since the
// last acknowledgement, or, when the sender has said it is full (the
// immediate's full bit) and at least one block was freed since, as soon
// as no arrived block waits to be returned by Receive. No deadlock: a
// sender that cannot send is full, its last block said so, and a receiver
// that has freed anything either reaches ackEvery or runs out of arrived
// blocks to return, at which point (in Receive or Release) it
// acknowledges. A blocked sender therefore waits only for the receiver's
// application, never for a timer. Kind 2 is Close's farewell.
//
// # Waiting
//
// Both doorbells sleep on the one receive completion queue: DataBell until
// a data arrival was taken from it, SpaceBell until an acknowledgement
// moved the tail. Arm takes what is queued and notes the counters; Sleep
// takes completions again and, if nothing changed, one sleeper at a time
// arms the queue and polls its notification fd while the others wait for
// it (the peer needs no arming: every write and acknowledgement produces
// a completion anyway). TrySend, Receive and Refresh take completions too,
// so a caller that polls them needs no sleeper to make progress.
//
// # Trust
//
// Immediates, completion lengths, acknowledgements and headers (through
// wire.DecodeHeader) are checked before use: a block number out of order,
// a length that disagrees with the header or the completion, a block
// beyond the free space, an acknowledgement that does not advance the
// tail or passes the head, an unknown message, each ends the transport
// with an error wrapping wire.ErrProtocol, after which Receive returns no
// more blocks. The peer's death or Close (flushed receives, the farewell)
// ends it with wire.ErrPeerGone once the blocks already arrived have been
// returned.
//
// # Ownership and limits
//
// Open takes the provider for the life of the Transport (it does not close
// it); Close releases the link and both regions. Payloads alias the ring
// and are valid until the block is released or the Transport closed. The
// link's doorbell queue pair carries everything (its send and receive
// queues hold 2N+2 requests, at most 8192: N writes, up to N
// acknowledgements and the farewell); the data queue pair stays idle.
// Close posts the farewell and closes at once: writes the peer's provider
// had not yet taken may be lost with it, as bytes in flight are with a
// TCP reset.
//
// It is deliberately not a wire.BlockCounter: with coalesced
// acknowledgements the sender's per-stream counts lag, and a per-stream
// cap on them could wait for an acknowledgement that is not due.
package slidingwindow
