// Package podns makes "pods" on one host out of Linux namespaces, as
// Kubernetes does, for the tests and benchmarks that run programs in
// them: a node network namespace with a bridge; per pod a network
// namespace (a veth into the bridge, its own subnet, so pod-to-pod
// traffic is routed through the node as with a routed CNI), and, per
// program, new pid and mount namespaces in which the node's run
// directory is bind-mounted at the pods' common path, run as the pod's
// uid. A service address is DNATed in the node namespace as kube-proxy
// does.
//
// A Cluster owns its namespaces and scratch directory until Close, which
// deletes them; RemoveStale deletes those of earlier processes that died
// before their Close. It needs root and ip, iptables, unshare, setpriv
// and mount. Only namespaces it creates carry traffic.
package podns
