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
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/internal/podns"
)

// "Pods" on one host (internal/podns) for the tests of pods_test.go:
// each pod a network namespace behind the node's bridge, each program in
// its own pid and mount namespaces with the run directory bind-mounted,
// as the pod's uid; a service address DNATed in the node namespace.

// podsGID is the group that shares the run directory between the pods'
// uids (mode 3770, core/rendezvous/rundir.go).
const podsGID = 4242

// cluster is one test's node namespace, run directories and pods.
type cluster struct {
	*podns.Cluster
	t *testing.T
	a artefacts
}

// pod is one pod of a test's cluster.
type pod struct{ podns.Pod }

// podProc says how a program runs in a pod.
type podProc = podns.Proc

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
// directory, deleted at the end whatever happened.
func newCluster(t *testing.T, a artefacts) *cluster {
	t.Helper()
	needPods(t)
	podns.RemoveStale("sdpt")
	pc, err := podns.New(fmt.Sprintf("sdpt%d-", os.Getpid()), a.lib, podsGID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pc.Close)
	return &cluster{Cluster: pc, t: t, a: a}
}

// addPod makes a pod (podns.Cluster.AddPod).
func (c *cluster) addPod(name string) pod {
	c.t.Helper()
	p, err := c.AddPod(name)
	if err != nil {
		c.t.Fatal(err)
	}
	return pod{p}
}

// service DNATs vip:port to the pod's target port (podns.Cluster.Service).
func (c *cluster) service(vip string, port int, to pod, target int) {
	c.t.Helper()
	if err := c.Service(vip, port, to.Pod, target); err != nil {
		c.t.Fatal(err)
	}
}

// startIn starts a long-running program in the pod, killed at the end
// (unshare --kill-child takes the pod's pid 1, and with it the pid
// namespace, down).
func (p pod) startIn(t *testing.T, pp podProc, limit time.Duration, name string, args ...string) *proc {
	t.Helper()
	cmd := p.Command(pp, name, args...)
	return start(t, cmd.Env, limit, cmd.Path, cmd.Args[1:]...)
}

// run runs a program in the pod to its end and returns its output.
func (p pod) run(t *testing.T, pp podProc, limit time.Duration, stdin []byte, name string, args ...string) (string, error) {
	t.Helper()
	cmd := p.Command(pp, name, args...)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd = exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	cmd.Env = podns.CleanEnv()
	cmd.WaitDelay = 5 * time.Second
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("%s in %s: %v: %s", name, p.Name, err, tail(stderr.String(), 20))
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
		if e := podns.InNetns(ns, func() {
			var c net.Conn
			if c, err = net.DialTimeout("tcp", addr.String(), time.Second); err == nil {
				c.Close()
			}
		}); e != nil {
			t.Fatalf("enter %s: %v", ns, e)
		}
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not serving in %s: %v", addr, ns, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// scratch makes a directory under the cluster's base that uid may write.
func (c *cluster) scratch(name string, uid int) string {
	c.t.Helper()
	d := filepath.Join(c.Base, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Chown(d, uid, uid); err != nil {
		c.t.Fatal(err)
	}
	return d
}
