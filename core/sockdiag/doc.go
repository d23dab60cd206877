// Package sockdiag asks the kernel's socket diagnostics (NETLINK_SOCK_DIAG,
// inet_diag) which socket holds the other end of a TCP connection within
// this network namespace: its inode, the identity a connector gives in
// advance, and its owner. An acceptor that accepted a loopback connection
// before its connector could name the port (core/rendezvous/unbound.go,
// unboundrec.go) learns from it at once whether the connection is one it
// waits for, and whose. It imports nothing of sdpshim.
//
// Every query opens its own netlink socket and closes it before it
// returns: no descriptor outlives a call, so a fork child or a host that
// closes descriptors it does not know never shares or loses one.
package sockdiag
