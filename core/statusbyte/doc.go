// Package statusbyte is the status-byte block transport (docs/design.md,
// "Seed 000"), a wire.Transport and wire.Retainer written only against
// verbs.Provider.
//
// Per direction the receiver owns N blocks of S bytes and N status bytes
// (0 empty, 1 data, 2 retained) in a region its peer may write and read.
// The sender picks a block its local view says is empty, writes header and
// payload into it with one WRITE from its registered staging copy, and the
// status byte 1 with a chained inline WRITE; the queue pair's ordering
// makes the status visible no earlier than the data. When its view has no
// empty block it READs the whole status array in one request and retries.
// The receiver is passive: it finds arrivals by scanning its status bytes
// (eight at a time, from where the last scan stopped), releases a block by
// storing 0 and retains one by storing 2. It never sends anything to
// announce space: the sender learns from its READ, and a sleeping sender
// from the doorbell (doorbell.Bells) that a release rings when armed.
//
// Everything read from shared memory is validated: a status value other
// than the protocol allows, a header that does not decode, a status array
// that contradicts what the sender wrote, each ends the transport with an
// error wrapping wire.ErrProtocol.
//
// Ownership: Open takes the provider for the life of the Transport (it
// does not close it); Close releases the link and both regions. Payloads
// of received blocks alias the receive region and are valid until the
// block is released or the Transport is closed.
package statusbyte
