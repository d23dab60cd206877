package tests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// memcached (2 worker threads) under the memcached text-protocol load
// generator bench/programs/csrc/mcload.c in each mode: 8 connections,
// 1000 operations each (1 set per 9 gets, 1 KiB values), every value a
// get returns checked against the last one set.
func TestProgramsMemcached(t *testing.T) {
	a := build(t)
	memcached := need(t, "memcached")
	mcload := cbuild(t, "../bench/programs/csrc/mcload.c", "-pthread")
	const conns = 8
	for _, m := range allModes {
		t.Run(m.name, func(t *testing.T) {
			r := newPairRun(t, a, m)
			port := freePort(t)
			srv := start(t, r.serverEnv(t), 60*time.Second, memcached, "-l", "127.0.0.1", "-p", fmt.Sprint(port),
				"-U", "0", "-t", "2", "-u", "root")
			waitListen(t, srv, port)
			out := runTo(t, r.clientEnv(t), 60*time.Second, mcload, "-p", fmt.Sprint(port), "-c", fmt.Sprint(conns),
				"-n", "1000", "-s", "1024")
			var res struct{ Ops, Errors int }
			if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &res); err != nil || res.Errors != 0 || res.Ops != conns*1000 {
				t.Fatalf("mcload: %v %q", err, out)
			}
			r.checkPair(t, conns, false)
		})
	}
}
