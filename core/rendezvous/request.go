package rendezvous

import "golang.org/x/sys/unix"

// Payload is the opaque part of an offer or an answer: bytes and file
// descriptors (memfds, eventfds) the channel layer puts there. At most
// MaxData bytes and MaxFiles files.
type Payload struct {
	Data  []byte
	Files []int
}

// CloseFiles closes every file of p.
func (p Payload) CloseFiles() { closeFiles(p.Files) }

func (p Payload) fits() bool { return len(p.Data) <= MaxData && len(p.Files) <= MaxFiles }

// Request is a valid offer as the listener process's Handler sees it.
type Request struct {
	// Tuple is the connection the connector is about to make.
	Tuple Tuple
	// PID is the pid the connector sent (its own getpid; informational:
	// in another pid namespace it differs from Cred.Pid).
	PID int
	// Cred is the connector's SO_PEERCRED, already checked against the
	// allowed uids.
	Cred unix.Ucred
	// Payload is the connector's offer. The Handler owns Payload.Files in
	// every case (it keeps or closes them, also when it returns an error).
	Payload Payload

	committed bool   // a committed offer (OfferCommitted): answered at the claim
	sock      uint32 // an unbound offer's: the connector's socket inode, 0 unknown
}

// Handler answers an offer in the listener process. A nil error accepts:
// answer goes back to the connector (the Handler keeps ownership of
// answer.Files; the rendezvous only sends them) and prepared is kept with
// the pending entry until Claim returns it or the entry is dropped
// (Config.OnDrop). An error refuses, with the reason it carries
// (a *FallbackError) or ReasonRefused. A Handler runs on the rendezvous
// server's goroutine while the connector waits (its deadline is about
// 200 ms), or, for a committed offer, on the goroutine of a Claim that
// looked for it (intake): it must be quick and must not call Claim.
type Handler func(req Request) (answer Payload, prepared any, err error)

// Match is what Claim returns and OnDrop receives: the request (its
// Payload.Files are nil: they went to the Handler) and the Handler's
// prepared value.
type Match struct {
	Request  Request
	Prepared any
}

// DropCause says why a pending entry was dropped without a claim.
type DropCause uint8

// Drop causes.
const (
	// DropExpired: no accept() claimed it in time (the connect failed or
	// never happened, or accept() was too late).
	DropExpired DropCause = iota + 1
	// DropReplaced: a newer offer for the same 4-tuple replaced it.
	DropReplaced
	// DropAborted: accept() found the 4-tuple but the connector had not
	// committed (it gave up and connected as plain TCP).
	DropAborted
	// DropUndelivered: the answer could not be sent back, or the pending
	// table was full.
	DropUndelivered
	// DropClosed: the Node was closed.
	DropClosed
	// DropFDLimit: the program's accept() found its process at its fd
	// limit while the offer waited (ReleaseForAccept).
	DropFDLimit
	// DropUnbound: an unbound offer (unbound.go) whose port came after
	// the accept() that could have claimed its connection had left it
	// plain, or never came (the connector went first, or sent garbage).
	DropUnbound
)

func (c DropCause) String() string {
	switch c {
	case DropExpired:
		return "expired"
	case DropReplaced:
		return "replaced"
	case DropAborted:
		return "aborted"
	case DropUndelivered:
		return "undelivered"
	case DropClosed:
		return "closed"
	case DropFDLimit:
		return "fd-limit"
	case DropUnbound:
		return "unbound"
	}
	return "unknown"
}
