package tests

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// redis-server with redis-cli and redis-benchmark in each mode: a 1 MiB
// random value SET by one redis-cli comes back byte for byte from GET in
// another; redis-benchmark completes SET and GET over 4 connections. Both
// shimmed, every connection is accelerated on both sides; one side
// shimmed, each falls back because the peer is not shimmed.
func TestProgramsRedis(t *testing.T) {
	a := build(t)
	server := need(t, "redis-server")
	cli := need(t, "redis-cli")
	bench := need(t, "redis-benchmark")
	val := make([]byte, 1<<20)
	rand.Read(val)
	valFile := filepath.Join(t.TempDir(), "value")
	if err := os.WriteFile(valFile, val, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, m := range allModes {
		t.Run(m.name, func(t *testing.T) {
			r := newPairRun(t, a, m)
			port := fmt.Sprint(freePort(t))
			srv := start(t, r.serverEnv(t), 60*time.Second, server, "--port", port, "--bind", "127.0.0.1",
				"--save", "", "--appendonly", "no", "--dir", t.TempDir())
			waitListen(t, srv, atoiT(t, port))

			set := exec.Command(cli, "-p", port, "-x", "set", "blob")
			set.Env = r.clientEnv(t)
			set.Stdin = bytes.NewReader(val)
			if out, err := set.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "OK" {
				t.Fatalf("redis-cli set: %v %q", err, out)
			}
			got := runTo(t, r.clientEnv(t), 30*time.Second, cli, "-p", port, "--raw", "get", "blob")
			if !bytes.Equal([]byte(strings.TrimSuffix(got, "\n")), val) {
				t.Fatalf("GET returned %d bytes that differ from the 1 MiB value SET", len(got))
			}
			out := runTo(t, r.clientEnv(t), 60*time.Second, bench, "-p", port, "-c", fmt.Sprint(redisBenchConns), "-n", "4000",
				"-t", "set,get", "-d", "256", "--csv")
			for _, test := range []string{`"SET"`, `"GET"`} {
				if !strings.Contains(out, test) {
					t.Fatalf("redis-benchmark printed no %s result:\n%s", test, out)
				}
			}
			// redis-cli: 2 connections; redis-benchmark: redisBenchConns
			// per test, and one to read the server's configuration.
			r.checkPair(t, 2+2*redisBenchConns, true)
		})
	}
}

// redisBenchConns is redis-benchmark's -c: several connections opened and
// closed between tests, with EPOLL_CTL_MOD toggling writability, which
// once let an event of a removed entry reach the program with a token of
// the shim's as its data (redis-benchmark crashed in every other run).
const redisBenchConns = 4

func atoiT(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// redis-server forks a child for BGSAVE that never touches the clients'
// connections: a redis-cli session that spans a BGSAVE stays accelerated
// on both sides (the server keeps it across the fork: shim/forkkeep.go),
// and every reply is right. Before, each background save switched every
// client connection to kernel TCP for good.
func TestProgramsRedisBGSAVE(t *testing.T) {
	a := build(t)
	server := need(t, "redis-server")
	cli := need(t, "redis-cli")
	r := newPairRun(t, a, bothShimmed)
	port := fmt.Sprint(freePort(t))
	dir := t.TempDir()
	srv := start(t, r.serverEnv(t), 60*time.Second, server, "--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir)
	waitListen(t, srv, atoiT(t, port))

	c := exec.Command(cli, "-p", port)
	c.Env = r.clientEnv(t)
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(in, "SET before 1\nBGSAVE\n")
	dump := filepath.Join(dir, "dump.rdb")
	for deadline := time.Now().Add(20 * time.Second); ; {
		if _, err := os.Stat(dump); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("BGSAVE wrote no %s; redis-cli: %q", dump, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the child's exit reaped
	fmt.Fprintf(in, "SET after 2\nGET before\nGET after\n")
	in.Close()
	if err := c.Wait(); err != nil {
		t.Fatalf("redis-cli: %v %q", err, out.String())
	}
	if got := out.String(); got != "OK\nBackground saving started\nOK\n1\n2\n" {
		t.Fatalf("redis-cli answered %q", out.String())
	}
	srvLog := readLog(t, r.srvLog)
	if !strings.Contains(srvLog, "fork: connections kept accelerated for the child") {
		t.Errorf("redis-server's fork kept nothing:\n%s", tail(srvLog, 30))
	}
	if strings.Contains(srvLog, "switched to kernel TCP") || strings.Contains(readLog(t, r.cliLog), "switched to kernel TCP") {
		t.Errorf("a connection switched to kernel TCP at BGSAVE")
	}
	r.checkPair(t, 1, false)
}
