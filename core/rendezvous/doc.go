// Package rendezvous is sdpshim's same-host negotiation: it runs before
// the TCP SYN, over unix sockets in the per-user run directory, so a plain
// peer never sees an extra byte.
//
// Listener process: a shimmed listen() calls Node.Register, which starts
// the process's rendezvous server (<rundir>/p<pid>-<random>.sock, 0600)
// and publishes an entry file per (port, pid). The server checks each
// client's SO_PEERCRED uid, reads one offer, asks the caller's Handler,
// files the accepted offer in a pending table keyed by the 4-tuple and
// sends the answer. accept() calls Node.Claim with the new connection's
// addresses: a committed offer for that 4-tuple means accelerated,
// anything else means plain TCP. Unclaimed offers expire (Config.OnDrop).
//
// Connector process: a shimmed connect() to a local address calls
// Node.Lookup, binds its socket, calls Node.Offer (its 4-tuple, pid and
// the channel layer's opaque payload and fds) and, on an Answer, calls
// Answer.Commit right before the real connect(), or Answer.Abort before a
// plain one. Commit-before-connect is what lets accept() know for certain
// whether the connector went accelerated (see Answer for the acceptor's
// verdict, which closes the remaining window).
//
// Group listeners (deferred.go, pull.go): a listener shared with fork
// children is published with "mode group" (SetGroup). A connector of one
// makes no offer: it calls Defer (a record file named by the 4-tuple, its
// server started by Serve) and connects; the process that first uses the
// accepted socket finds the record (FindDeferred) and calls Pull, which
// asks the connector to make a normal Offer to the puller's server and
// claims it. The connector alone decides between a PULL and giving up.
//
// Every failure is a *FallbackError carrying a Reason; the Reason values
// (reason.go, docs/reasons.md) are the project's fallback codes.
//
// Ownership: Offer's caller keeps the offer's files and owns the answer's;
// the Handler owns the request's files and keeps the answer's; Match and
// OnDrop hand back the Handler's prepared value, never files. Nothing here
// imports core: the channel layer sits above and puts its setup in the
// payloads.
//
// Robustness: every socket is nonblocking and every read or write has a
// deadline; frames are bounded (MaxData bytes, MaxFiles files, checked
// before allocation); received files are closed on any error; entry files
// are bounded, parsed strictly, and removed when garbage or stale (dead
// pid, or a reused pid told apart by its start time).
package rendezvous
