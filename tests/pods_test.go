package tests

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Pods on one host (pods_env_test.go): pod a's clients reach pod b's
// servers through b's address and through a service address DNATed in
// the node namespace, each pod in its own network, pid and mount
// namespaces, as its own uid, the run directory shared through the
// pods' group. Every byte must come back right, every connection between
// shimmed pods must be accelerated on both sides, and every other one
// must fall back with its reason.

// Uids of the pods: a and b trust each other (SDPSHIM_ALLOW_UIDS); the
// outsider's uid does not.
const (
	uidA, uidB, uidOutsider = 1001, 1002, 1003
	podServices             = "SDPSHIM_SERVICES=10.96.0.0/16"
	podAllow                = "SDPSHIM_ALLOW_UIDS=1001,1002"
)

// podLogs returns a directory every pod's uid may write logs into.
func (c *cluster) podLogs() string {
	d := filepath.Join(c.Base, "logs")
	os.Mkdir(d, 0o755)
	os.Chmod(d, 0o777|os.ModeSticky)
	return d
}

// TestPodsRedis: redis-server in pod b, redis-cli and redis-benchmark in
// pod a, through b's address and through a service address: a 1 MiB
// value SET comes back byte for byte, redis-benchmark completes, and
// every connection is accelerated on both sides. A plain redis-server in
// pod c: a shimmed client falls back, peer-not-shimmed through c's
// address, deferred-acceptor-plain through c's service address (nobody on
// the host claims it; its request went out on the kernel socket at once,
// and the plain server's answer ends the deferral), and the bytes are
// right.
func TestPodsRedis(t *testing.T) {
	a := build(t)
	server := need(t, "redis-server")
	cli := need(t, "redis-cli")
	bench := need(t, "redis-benchmark")
	c := newCluster(t, a)
	podA, podB, podC := c.addPod("a"), c.addPod("b"), c.addPod("c")
	c.service("10.96.0.10", 6379, podB, 6379)
	c.service("10.96.0.11", 6379, podC, 6379)
	logs := c.podLogs()
	srvLog, cliLog := filepath.Join(logs, "server.log"), filepath.Join(logs, "client.log")
	srvPP := podProc{UID: uidB, Groups: []int{podsGID}, Shim: true, Env: []string{podAllow, podServices}, Log: srvLog}
	cliPP := podProc{UID: uidA, Groups: []int{podsGID}, Shim: true, Env: []string{podAllow, podServices}, Log: cliLog}
	redisArgs := func(dir string) []string {
		return []string{"--port", "6379", "--bind", "0.0.0.0", "--protected-mode", "no", "--save", "", "--appendonly", "no", "--dir", dir}
	}
	podB.startIn(t, srvPP, 120*time.Second, server, redisArgs(c.scratch("redis-b", uidB))...)
	podC.startIn(t, podProc{UID: uidOutsider}, 120*time.Second, server, redisArgs(c.scratch("redis-c", uidOutsider))...)
	waitServing(t, podA.NS, addrPort(podB, 6379))
	waitServing(t, podA.NS, addrPort(podC, 6379))
	defer func() {
		if t.Failed() {
			t.Logf("client log:\n%s", tail(readLog(t, cliLog), 40))
			t.Logf("server log:\n%s", tail(readLog(t, srvLog), 40))
		}
	}()

	val := make([]byte, 1<<20)
	rand.Read(val)
	conns := 0
	for _, dst := range []string{podB.Addr.String(), "10.96.0.10"} {
		redisRoundTrip(t, podA, cliPP, cli, dst, val)
		out, err := podA.run(t, cliPP, 60*time.Second, nil, bench, "-h", dst, "-p", "6379", "-c", fmt.Sprint(redisBenchConns),
			"-n", "2000", "-t", "set,get", "-d", "256", "--csv")
		if err != nil || !strings.Contains(out, `"SET"`) || !strings.Contains(out, `"GET"`) {
			t.Fatalf("redis-benchmark to %s: %v\n%s", dst, err, out)
		}
		conns += 2 + 2*redisBenchConns
	}
	cliV := logVerdicts(t, cliLog, false)
	srvV, answered := statsVerdicts(t, c.HostRD)
	t.Logf("client (log) %v; server (stats of %d processes) %v", cliV, answered, srvV)
	conns = max(conns, cliV.total())
	expectAll(t, "client (log)", cliV, conns, true, "")
	expectServer(t, srvV, conns, 1)

	// The plain pod: through its address, then its service address.
	redisRoundTrip(t, podA, cliPP, cli, podC.Addr.String(), val[:4096])
	redisRoundTrip(t, podA, cliPP, cli, "10.96.0.11", val[:4096])
	v := logVerdicts(t, cliLog, false)
	if v.fallbacks[reasonNotShimmed] != 2 || v.fallbacks[reasonDeferredPlain] != 2 || v.accelerated != cliV.accelerated {
		t.Errorf("client to the plain pod: want 2 %s and 2 %s fallbacks, got %v", reasonNotShimmed, reasonDeferredPlain, v)
	}
}

// expectServer checks a server's verdicts: n accelerated connections,
// and probes plain ones (waitServing's, from an unshimmed test process)
// fallen back as peer-not-shimmed.
func expectServer(t *testing.T, v verdicts, n, probes int) {
	t.Helper()
	if v.accelerated != n || v.fallbacks[reasonNotShimmed] != probes || v.total() != n+probes {
		t.Errorf("server (stats): want %d accelerated and %d %s (readiness probes), got %v", n, probes, reasonNotShimmed, v)
	}
}

// redisRoundTrip SETs val with one redis-cli in pod p and GETs it back
// with another, comparing every byte.
func redisRoundTrip(t *testing.T, p pod, pp podProc, cli, host string, val []byte) {
	t.Helper()
	key := fmt.Sprintf("blob-%s-%d", host, len(val))
	out, err := p.run(t, pp, 30*time.Second, val, cli, "-h", host, "-p", "6379", "-x", "set", key)
	if err != nil || strings.TrimSpace(out) != "OK" {
		t.Fatalf("redis-cli set to %s: %v %q", host, err, out)
	}
	got, err := p.run(t, pp, 30*time.Second, nil, cli, "-h", host, "-p", "6379", "--raw", "get", key)
	if err != nil || !bytes.Equal([]byte(strings.TrimSuffix(got, "\n")), val) {
		t.Fatalf("GET from %s returned %d bytes that differ from the %d SET (%v)", host, len(got), len(val), err)
	}
}

// TestPodsNginx: nginx in pod b serves an 8 MiB file (sendfile) to curl
// in pod a through b's address and through a service whose port the NAT
// translates (80 to 8080): the file is byte-exact and both connections
// are accelerated on both sides.
func TestPodsNginx(t *testing.T) {
	a := build(t)
	nginx := need(t, "nginx")
	curl := need(t, "curl")
	c := newCluster(t, a)
	podA, podB := c.addPod("a"), c.addPod("b")
	c.service("10.96.0.20", 80, podB, 8080)
	logs := c.podLogs()
	srvLog, cliLog := filepath.Join(logs, "server.log"), filepath.Join(logs, "client.log")
	www := c.scratch("www", uidB)
	want := writeRandomFile(t, filepath.Join(www, "big.bin"), 8<<20)
	os.Chmod(filepath.Join(www, "big.bin"), 0o644)
	conf := podNginxConf(t, c.scratch("nginx", uidB), www, 8080)
	podB.startIn(t, podProc{UID: uidB, Groups: []int{podsGID}, Shim: true, Env: []string{podAllow, podServices}, Log: srvLog},
		120*time.Second, nginx, "-p", filepath.Dir(conf), "-c", conf, "-e", filepath.Join(filepath.Dir(conf), "error.log"))
	waitServing(t, podA.NS, addrPort(podB, 8080))
	cliPP := podProc{UID: uidA, Groups: []int{podsGID}, Shim: true, Env: []string{podAllow, podServices}, Log: cliLog}
	out := c.scratch("got", uidA)
	for i, url := range []string{fmt.Sprintf("http://%s:8080/big.bin", podB.Addr), "http://10.96.0.20/big.bin"} {
		dst := filepath.Join(out, fmt.Sprintf("got%d.bin", i))
		if o, err := podA.run(t, cliPP, 60*time.Second, nil, curl, "-sS", "--fail", "-o", dst, url); err != nil {
			t.Fatalf("curl %s: %v %s", url, err, o)
		}
		if got := fileHash(t, dst); got != want {
			t.Fatalf("file from nginx through %s differs: sha256 %x, want %x", url, got, want)
		}
	}
	cliV := logVerdicts(t, cliLog, false)
	srvV, answered := statsVerdicts(t, c.HostRD)
	t.Logf("client (log) %v; server (stats of %d processes) %v", cliV, answered, srvV)
	expectAll(t, "client (log)", cliV, 2, true, "")
	expectServer(t, srvV, 2, 1)
	if t.Failed() {
		t.Logf("client log:\n%s", tail(readLog(t, cliLog), 40))
		t.Logf("server log:\n%s", tail(readLog(t, srvLog), 40))
	}
}

// podNginxConf writes a single-process nginx configuration (run as a
// pod's uid: every path its own) listening on port of every address.
func podNginxConf(t *testing.T, dir, www string, port int) string {
	t.Helper()
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 256; }
http {
  access_log off;
  sendfile on;
  client_body_temp_path %[1]s/tmp;
  proxy_temp_path %[1]s/tmp;
  fastcgi_temp_path %[1]s/tmp;
  uwsgi_temp_path %[1]s/tmp;
  scgi_temp_path %[1]s/tmp;
  server { listen %[2]d; root %[3]s; }
}
`, dir, port, www)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPodsIsolation: pods that may not reach pod b's shimmed redis get
// kernel TCP, never its memory or its stats. The outsider's uid in the
// pods' group (it can enter the run directory) is refused by SO_PEERCRED
// (rendezvous-refused) through b's address; the outsider without the
// group cannot use the run directory (rundir-unusable); a plain client
// pod is seen by the server as peer-not-shimmed; the outsider cannot read
// b's stats while pod a's uid can. Every byte is right in every case.
func TestPodsIsolation(t *testing.T) {
	a := build(t)
	server := need(t, "redis-server")
	cli := need(t, "redis-cli")
	c := newCluster(t, a)
	podA, podB, podD := c.addPod("a"), c.addPod("b"), c.addPod("d")
	logs := c.podLogs()
	srvLog := filepath.Join(logs, "server.log")
	srvPP := podProc{UID: uidB, Groups: []int{podsGID}, Shim: true, Env: []string{podAllow}, Log: srvLog}
	podB.startIn(t, srvPP, 120*time.Second, server, "--port", "6379", "--bind", "0.0.0.0", "--protected-mode", "no",
		"--save", "", "--appendonly", "no", "--dir", c.scratch("redis-b", uidB))
	waitServing(t, podD.NS, addrPort(podB, 6379))
	val := make([]byte, 64<<10)
	rand.Read(val)
	cases := []struct {
		name   string
		pp     podProc
		reason string
	}{
		{"outsider in the group", podProc{UID: uidOutsider, Groups: []int{podsGID}, Shim: true,
			Env: []string{"SDPSHIM_ALLOW_UIDS=1002"}}, "rendezvous-refused"},
		{"outsider", podProc{UID: uidOutsider, Shim: true, Env: []string{"SDPSHIM_ALLOW_UIDS=1002"}}, "rundir-unusable"},
	}
	for _, tc := range cases {
		tc.pp.Log = filepath.Join(logs, strings.ReplaceAll(tc.name, " ", "-")+".log")
		redisRoundTrip(t, podD, tc.pp, cli, podB.Addr.String(), val)
		v := logVerdicts(t, tc.pp.Log, false)
		if v.accelerated != 0 || v.fallbacks[tc.reason] != 2 {
			t.Errorf("%s: want 2 connections fallen back for %s, got %v\n%s", tc.name, tc.reason, v, tail(readLog(t, tc.pp.Log), 20))
		}
	}
	// A plain client pod: the server sees a peer that is not shimmed.
	redisRoundTrip(t, podD, podProc{UID: uidOutsider}, cli, podB.Addr.String(), val)
	srvV, _ := statsVerdicts(t, c.HostRD)
	// 2 refused by uid (no offer reached the listener: counted there as
	// plain accepts), 2 outsiders without the run directory, 2 plain.
	// and waitServing's probe.
	if srvV.accelerated != 0 || srvV.fallbacks[reasonNotShimmed] != 7 || srvV.total() != 7 {
		t.Errorf("server (stats): want 7 connections fallen back for %s, got %v", reasonNotShimmed, srvV)
	}

	// Stats: refused to the outsider, served to pod a's uid.
	sdp := filepath.Join(filepath.Dir(a.lib), "sdpshim")
	out, err := podD.run(t, podProc{UID: uidOutsider, Groups: []int{podsGID}}, 20*time.Second, nil, sdp, "stats", "--json")
	if err == nil && strings.Contains(out, `"connections"`) && strings.Contains(out, "6379") {
		t.Errorf("the outsider read pod b's stats:\n%s", out)
	}
	out, err = podA.run(t, podProc{UID: uidA, Groups: []int{podsGID}}, 20*time.Second, nil, sdp, "stats", "--json")
	if err != nil || !strings.Contains(out, "6379") {
		t.Errorf("pod a's uid could not read pod b's stats: %v\n%s", err, out)
	}
}

// addrPort is the pod's address with port.
func addrPort(p pod, port uint16) netip.AddrPort { return netip.AddrPortFrom(p.Addr, port) }
