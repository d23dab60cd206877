package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Ephemeral ports. Kernel TCP picks a connection's source port at
// connect() and shares each port among destinations, so a client may
// open more connections in a minute than the ephemeral range holds ports,
// as long as no destination sees one 4-tuple twice. The shim used to bind
// every accelerated socket before its connect(), to name the 4-tuple in
// its offer, and a bound port is one no other socket may hold, TIME_WAIT
// included: such a client ran out of ports under the shim alone. Now its
// offer leaves the port to connect() (core/rendezvous/unbound.go), and so
// does a deferral's record, for a pre-fork server
// (core/rendezvous/unboundrec.go).
//
// In a network namespace of its own whose ephemeral range is 64 ports,
// four churn servers (tests/testdata/churn.c; their listeners take four
// of the ports) each get 50 connections, one after another, from a
// client of their own, four clients at once: 200 connections, each
// closed by its client first (TIME_WAIT on the client's side), and at
// most 60 ports. Kernel TCP and the shim must both serve them all, and
// under the shim every connection must be accelerated. Then the same with
// pre-fork servers (a fork child of each accepts on its listener too), whose
// connections are deferred and pulled.
const (
	portsRange   = "40000 40063"
	portsServers = 4
	portsConns   = 50
)

// portsScript runs the servers and clients in the namespace; the churn
// processes get $CHURN_PRELOAD as LD_PRELOAD (the shell and ip do not).
const portsScript = `set -e
ip link set lo up
echo "` + portsRange + `" > /proc/sys/net/ipv4/ip_local_port_range
servers=""
for i in $(seq $SERVERS); do
	LD_PRELOAD="$CHURN_PRELOAD" "$CHURN" server $SHAPE > "$DIR/server$i" 2>&1 &
	servers="$servers $!"
done
ports=""
for i in $(seq $SERVERS); do
	for k in $(seq 200); do grep -q port "$DIR/server$i" && break; sleep 0.05; done
	ports="$ports $(tr -cd 0-9 < "$DIR/server$i")"
done
clients=""
for p in $ports; do
	LD_PRELOAD="$CHURN_PRELOAD" "$CHURN" client "$p" "$CONNS" 64 exit > "$DIR/client$p" 2>&1 &
	clients="$clients $!"
done
rc=0
for c in $clients; do wait "$c" || rc=1; done
kill $servers
cat "$DIR"/client*
exit $rc
`

func TestEphemeralPortsShared(t *testing.T) {
	needPods(t)
	a := build(t)
	bin := cbuildShared(t, "testdata/churn.c")
	for _, shape := range []string{"", "prefork"} {
		for _, shim := range []bool{false, true} {
			portsRun(t, a, bin, shape, shim)
		}
	}
}

// portsRun is one column of TestEphemeralPortsShared: servers of the shape
// given ("" or "prefork"), shimmed or not.
func portsRun(t *testing.T, a artefacts, bin, shape string, shim bool) {
	dir := t.TempDir()
	log := filepath.Join(dir, "shim.log")
	var env []string
	for _, kv := range a.environ(t, side{shim: shim, log: log}, runDir(t)) {
		if v, ok := strings.CutPrefix(kv, "LD_PRELOAD="); ok {
			kv = "CHURN_PRELOAD=" + v
		}
		env = append(env, kv)
	}
	env = append(env, "CHURN="+bin, "DIR="+dir, "SHAPE="+shape, fmt.Sprintf("SERVERS=%d", portsServers), fmt.Sprintf("CONNS=%d", portsConns))
	p := start(t, env, 2*time.Minute, "unshare", "--net", "--", "sh", "-c", portsScript)
	err := p.wait()
	out := p.out.String()
	if err != nil || strings.Count(out, fmt.Sprintf(`{"ok":%d}`, portsConns)) != portsServers {
		t.Fatalf("%q, shim %v: %v\n%s\n%s", shape, shim, err, out, p.errb.String())
	}
	if !shim {
		return
	}
	b, _ := os.ReadFile(log)
	claimed := "accepted accelerated"
	if shape == "prefork" {
		claimed = "deferred connection claimed: accelerated"
	}
	if n := strings.Count(string(b), claimed); n != portsServers*portsConns {
		t.Fatalf("%q: %d of %d connections accelerated:\n%s", shape, n, portsServers*portsConns, tail(string(b), 3000))
	}
}
