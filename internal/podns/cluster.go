package podns

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"

	"github.com/sdpshim/sdpshim/core/rendezvous"
)

// Cluster is one node namespace, its pods and the shared run directory.
type Cluster struct {
	Prefix string // namespace names: <Prefix>node, <Prefix><pod>, ...
	Node   string // the node's network namespace
	HostRD string // the run directory as the node (and the caller) sees it
	PodRD  string // where each program's mount namespace binds it
	Base   string // world-traversable scratch (logs, data), removed by Close
	Lib    string // libsdpshim.so, preloaded into programs run shimmed
	netns  []string
	npods  int
}

// Pod is one pod: its network namespace and address.
type Pod struct {
	C    *Cluster
	Name string
	NS   string
	Addr netip.Addr
}

// New makes the node namespace with its bridge and the run directory
// shared by gid (root's, setgid and sticky, nothing for others: what
// the node agent prepares). prefix must be unique to the caller (names of
// namespaces and interfaces derive from it); lib is libsdpshim.so.
func New(prefix, lib string, gid int) (c *Cluster, err error) {
	base, err := os.MkdirTemp("", "sdppods")
	if err != nil {
		return nil, err
	}
	c = &Cluster{Prefix: prefix, Node: prefix + "node", Base: base, Lib: lib,
		HostRD: filepath.Join(base, "noderun"), PodRD: filepath.Join(base, "podrun")}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if err := os.Chmod(base, 0o755); err != nil {
		return nil, err
	}
	if err := os.Mkdir(c.PodRD, 0o755); err != nil {
		return nil, err
	}
	if err := rendezvous.PrepareRunDir(c.HostRD, gid); err != nil { // as the node agent does
		return nil, err
	}
	if err := c.addNetns(c.Node); err != nil {
		return nil, err
	}
	return c, c.Sh(c.Node, "ip link add br0 type bridge && ip link set br0 up && ip link set lo up && "+
		"sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.send_redirects=0 net.ipv4.conf.default.send_redirects=0")
}

// Close deletes the namespaces (the node's last: its bridge goes with
// it) and the scratch directory.
func (c *Cluster) Close() {
	for _, ns := range slices.Backward(c.netns) {
		exec.Command("ip", "netns", "del", ns).Run()
	}
	c.netns = nil
	os.RemoveAll(c.Base)
}

// addNetns creates a network namespace, deleted by Close.
func (c *Cluster) addNetns(name string) error {
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns add %s: %v %s", name, err, out)
	}
	c.netns = append(c.netns, name)
	return nil
}

// Sh runs a shell command in namespace ns ("" for the caller's).
func (c *Cluster) Sh(ns, cmd string) error {
	args := []string{"-c", cmd}
	name := "sh"
	if ns != "" {
		name, args = "ip", append([]string{"netns", "exec", ns, "sh"}, args...)
	}
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v\n%s", cmd, err, out)
	}
	return nil
}

// AddPod makes a pod: a namespace whose eth0 is a veth to the node's
// bridge, address 10.231.<n>.2/24 for the n-th pod (at most 250), the
// node's 10.231.<n>.1 its gateway.
func (c *Cluster) AddPod(name string) (Pod, error) {
	c.npods++
	n := c.npods
	if n > 250 {
		return Pod{}, fmt.Errorf("pod %s: at most 250 pods", name)
	}
	p := Pod{C: c, Name: name, NS: c.Prefix + name, Addr: netip.MustParseAddr(fmt.Sprintf("10.231.%d.2", n))}
	if err := c.addNetns(p.NS); err != nil {
		return p, err
	}
	// The node's end: at most 15 bytes (IFNAMSIZ), unique among the
	// node's interfaces.
	veth := fmt.Sprintf("v%d", n)
	if err := c.Sh(c.Node, fmt.Sprintf("ip link add %[1]s type veth peer name eth0 netns %[2]s && ip link set %[1]s master br0 up && "+
		"ip addr add 10.231.%[3]d.1/24 dev br0", veth, p.NS, n)); err != nil {
		return p, err
	}
	return p, c.Sh(p.NS, fmt.Sprintf("ip link set lo up && ip link set eth0 up && ip addr add %s/24 dev eth0 && "+
		"ip route add default via 10.231.%d.1", p.Addr, n))
}

// Service DNATs vip:port to the pod's address and target port in the
// node namespace, as kube-proxy does for a ClusterIP service.
func (c *Cluster) Service(vip string, port int, to Pod, target int) error {
	return c.Sh(c.Node, fmt.Sprintf("iptables -t nat -A PREROUTING -d %s/32 -p tcp --dport %d -j DNAT --to-destination %s:%d",
		vip, port, to.Addr, target))
}
