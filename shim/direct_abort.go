package shim

import "github.com/sirupsen/logrus"

// abortProtocol counts the direct connections this process reset because
// the peer broke the protocol (a corrupt block header, a cursor or status
// byte out of range, a FIN that skips blocks: preload/c/direct.c).
const abortProtocol = "abort.protocol-violation"

// noteViolations logs at warn and counts, once per connection (release),
// what the peer broke on the handle: the C data calls, the interposer's
// included, found it and reset the connection, and cannot log.
func (ds *directStream) noteViolations() {
	v := ds.conn.Stats().Violations
	if v == 0 {
		return
	}
	ds.p.count(abortProtocol)
	ds.p.log.WithFields(logrus.Fields{"peer_pid": ds.peerPID, "violations": v}).
		Warn("direct connection reset: the peer broke the protocol in the shared area (corrupt header, cursor or status)")
}
