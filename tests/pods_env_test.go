package tests

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// "Pods" on one host, as Kubernetes makes them, for the tests of
// pods_test.go: each pod is a network namespace (a veth into a bridge of
// a "node" namespace, its own subnet, so pod-to-pod traffic is routed
// through the node as with a routed CNI), a pid namespace (its first
// process is pid 1) and a mount namespace in which the node's run
// directory is bind-mounted at the pods' common path; its programs run
// as the pod's uid. A service address is DNATed in the node namespace as
// kube-proxy does. Only namespaces the test creates carry traffic, and
// they are deleted at the end, whatever happened.

// podsGID is the group that shares the run directory between the pods'
// uids (mode 3770, core/rendezvous/rundir.go).
const podsGID = 4242

// cluster is one test's node namespace, run directories and pods.
type cluster struct {
	t      *testing.T
	a      artefacts
	prefix string // namespace names: <prefix>node, <prefix>a, ...
	node   string
	hostRD string // the run directory as the node (and this test) sees it
	podRD  string // where each pod's mount namespace binds it
	base   string // world-traversable scratch (logs, data)
	npods  int
}

// pod is one pod: its network namespace and address.
type pod struct {
	c    *cluster
	name string
	ns   string
	addr netip.Addr
}

// podProc says how a program runs in a pod.
type podProc struct {
	uid    int
	groups []int    // supplementary groups; nil: none
	shim   bool     // LD_PRELOAD the interposer
	env    []string // extra NAME=VALUE
	log    string   // SDPSHIM_LOG_FILE (debug) when shimmed
}

// needPods skips (or fails in CI) without root or the tools.
func needPods(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the pod tests need root in CI")
		}
		t.Skip("the pod tests need root (network, pid and mount namespaces)")
	}
	for _, tool := range []string{"ip", "iptables", "unshare", "setpriv", "mount"} {
		need(t, tool)
	}
}

// newCluster makes the node namespace with its bridge and the shared run
// directory.
func newCluster(t *testing.T, a artefacts) *cluster {
	t.Helper()
	needPods(t)
	removeStaleNamespaces()
	base, err := os.MkdirTemp("", "sdppods")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	c := &cluster{t: t, a: a, prefix: fmt.Sprintf("sdpt%d-", os.Getpid()), base: base,
		hostRD: filepath.Join(base, "noderun"), podRD: filepath.Join(base, "podrun")}
	c.node = c.prefix + "node"
	for _, d := range []string{c.hostRD, c.podRD} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// What the node agent prepares (sdpshim agent): root's, the pods'
	// group, setgid and sticky, nothing for others.
	if err := os.Chown(c.hostRD, 0, podsGID); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(c.hostRD, 0o770|os.ModeSetgid|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	c.addNetns(c.node)
	c.sh(c.node, "ip link add br0 type bridge && ip link set br0 up && ip link set lo up && "+
		"sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.send_redirects=0 net.ipv4.conf.default.send_redirects=0")
	return c
}

// addNetns creates a network namespace, deleted at the end.
func (c *cluster) addNetns(name string) {
	c.t.Helper()
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		c.t.Fatalf("ip netns add %s: %v %s", name, err, out)
	}
	c.t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
}

// sh runs a shell command in namespace ns ("" for this one).
func (c *cluster) sh(ns, cmd string) {
	c.t.Helper()
	args := []string{"-c", cmd}
	name := "sh"
	if ns != "" {
		name, args = "ip", append([]string{"netns", "exec", ns, "sh"}, args...)
	}
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		c.t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
}

// addPod makes a pod: a namespace whose eth0 is a veth to the node's
// bridge, address 10.231.<n>.2/24, the node's 10.231.<n>.1 its gateway.
func (c *cluster) addPod(name string) pod {
	c.t.Helper()
	c.npods++
	n := c.npods
	p := pod{c: c, name: name, ns: c.prefix + name, addr: netip.MustParseAddr(fmt.Sprintf("10.231.%d.2", n))}
	c.addNetns(p.ns)
	veth := fmt.Sprintf("v%d%s", os.Getpid()%100000, name)
	c.sh(c.node, fmt.Sprintf("ip link add %[1]s type veth peer name eth0 netns %[2]s && ip link set %[1]s master br0 up && "+
		"ip addr add 10.231.%[3]d.1/24 dev br0", veth, p.ns, n))
	c.sh(p.ns, fmt.Sprintf("ip link set lo up && ip link set eth0 up && ip addr add %s/24 dev eth0 && "+
		"ip route add default via 10.231.%d.1", p.addr, n))
	return p
}

// service DNATs vip:port to the pod's address and target port in the
// node namespace, as kube-proxy does for a ClusterIP service.
func (c *cluster) service(vip string, port int, to pod, target int) {
	c.t.Helper()
	c.sh(c.node, fmt.Sprintf("iptables -t nat -A PREROUTING -d %s/32 -p tcp --dport %d -j DNAT --to-destination %s:%d",
		vip, port, to.addr, target))
}

// command returns the command line that runs name with args in the pod
// as pp says: its network namespace, new pid and mount namespaces (with
// /proc of the new pid namespace and the run directory bind-mounted), the
// pod's uid and groups, and the shim's environment for that program alone.
func (p pod) command(pp podProc, name string, args ...string) *exec.Cmd {
	c := p.c
	groups := "--clear-groups"
	if len(pp.groups) > 0 {
		var gs []string
		for _, g := range pp.groups {
			gs = append(gs, strconv.Itoa(g))
		}
		groups = "--groups=" + strings.Join(gs, ",")
	}
	env := []string{"SDPSHIM_RUNDIR=" + c.podRD}
	if pp.shim {
		env = append(env, "LD_PRELOAD="+c.a.lib)
		if pp.log != "" {
			env = append(env, "SDPSHIM_LOG_LEVEL=debug", "SDPSHIM_LOG_FILE="+pp.log)
		}
	}
	env = append(env, pp.env...)
	script := `mount --bind "$1" "$2" && u=$3 g=$4 && shift 4 && exec setpriv --reuid="$u" --regid="$u" "$g" -- env "$@"`
	full := append([]string{"netns", "exec", p.ns, "unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--",
		"sh", "-c", script, "pod", c.hostRD, c.podRD, strconv.Itoa(pp.uid), groups}, env...)
	full = append(full, name)
	full = append(full, args...)
	cmd := exec.Command("ip", full...)
	cmd.Env = cleanEnv()
	return cmd
}

// cleanEnv is this process's environment without the shim's variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LD_PRELOAD=") && !strings.HasPrefix(kv, "SDPSHIM_") {
			env = append(env, kv)
		}
	}
	return env
}

// startIn starts a long-running program in the pod, killed at the end
// (unshare --kill-child takes the pod's pid 1, and with it the pid
// namespace, down).
func (p pod) startIn(t *testing.T, pp podProc, limit time.Duration, name string, args ...string) *proc {
	t.Helper()
	cmd := p.command(pp, name, args...)
	return start(t, cmd.Env, limit, cmd.Path, cmd.Args[1:]...)
}

// run runs a program in the pod to its end and returns its output.
func (p pod) run(t *testing.T, pp podProc, limit time.Duration, stdin []byte, name string, args ...string) (string, error) {
	t.Helper()
	cmd := p.command(pp, name, args...)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd = exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	cmd.Env = cleanEnv()
	cmd.WaitDelay = 5 * time.Second
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("%s in %s: %v: %s", name, p.name, err, tail(stderr.String(), 20))
	}
	return string(out), err
}

// waitServing waits until addr accepts TCP connections from inside the
// namespace ns.
func waitServing(t *testing.T, ns string, addr netip.AddrPort) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var err error
		inNetns(t, ns, func() {
			var c net.Conn
			if c, err = net.DialTimeout("tcp", addr.String(), time.Second); err == nil {
				c.Close()
			}
		})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not serving in %s: %v", addr, ns, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// inNetns runs f on a thread moved into network namespace ns; the thread
// is never handed back to other goroutines (it ends with f's goroutine).
func inNetns(t *testing.T, ns string, f func()) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread exits with this goroutine
		fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
		}
		if err == nil {
			f()
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		t.Fatalf("enter %s: %v", ns, err)
	}
}

// scratch makes a directory under the cluster's base that uid may write.
func (c *cluster) scratch(name string, uid int) string {
	c.t.Helper()
	d := filepath.Join(c.base, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Chown(d, uid, uid); err != nil {
		c.t.Fatal(err)
	}
	return d
}

// removeStaleNamespaces deletes the namespaces of earlier test processes
// that died before their cleanup ran (sdpt<pid>-*, pid gone).
func removeStaleNamespaces() {
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), "sdpt")
		pid, _, ok2 := strings.Cut(rest, "-")
		n, err := strconv.Atoi(pid)
		if !ok || !ok2 || err != nil || n == os.Getpid() {
			continue
		}
		if unix.Kill(n, 0) == unix.ESRCH {
			exec.Command("ip", "netns", "del", e.Name()).Run()
		}
	}
}
