// Package setup establishes a channel between two processes over a unix
// socket: the hello exchange (versions, transport and flow-control names,
// block geometry; a mismatch is ErrMismatch), the two queue pairs of a
// Link (data, and doorbells) connected through the provider, and the
// queues that post work requests on them. Transports call Establish and
// keep the Link.
//
// It imports core/verbs and core/wire.
package setup
