package tests

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Durability of sent bytes (tests/testdata/durable.c): one end of a
// connection dies at a chosen moment, the other reports what it got. Each
// case runs the same program over kernel TCP and under the shim:
//
//   - a writer killed at once, 5 ms and 100 ms after its last send returned,
//     with 1000 B and 1 MB, before and after the acceptor accepted: the
//     survivor reads every byte a send returned for (count and checksum),
//     then ends as on kernel TCP (EOF: the dead writer left nothing unread);
//   - a writer killed with bytes of the survivor's unread (its close is a
//     reset): the survivor reads every byte and then ECONNRESET, as on kernel
//     TCP (whose reset may overtake the stream's tail: there a prefix);
//   - a reader killed with unread bytes: the survivor's recv, send and
//     recv again give what kernel TCP gives after the reset.
//
// Before the acceptor accepted, the writer's socket is nonblocking and
// stops at its first EAGAIN (kernel TCP's buffers and the shim's need
// not be the same size; each column is checked against its own count).
//
// The writer-killed cases run against a pre-fork server too (its listener
// held by a fork child: the shim defers the connection until a process
// uses it, shim/deferred.go), where the writer dies before anyone pulled
// the connection or after.
func TestDurableSentBytes(t *testing.T) {
	a := build(t)
	bin := cbuildShared(t, "testdata/durable.c")
	for _, before := range []bool{false, true} {
		for _, size := range []int{1000, 1 << 20} {
			for _, delay := range []int{0, 5, 100} {
				when := map[bool]string{false: "after-accept", true: "before-accept"}[before]
				t.Run(fmt.Sprintf("writer-killed/%s/%dB/%dms", when, size, delay), func(t *testing.T) {
					t.Parallel()
					var ends [2]string
					for i, shim := range []bool{false, true} {
						ends[i] = killedWriter(t, a, bin, shim, writerCase{before: before, size: size, delay: delay})
					}
					if ends[0] != ends[1] {
						t.Errorf("the survivor's end: %s on kernel TCP, %s under the shim", ends[0], ends[1])
					}
				})
			}
		}
	}
	for _, before := range []bool{false, true} {
		for _, size := range []int{1000, 1 << 20} {
			for _, delay := range []int{0, 5, 100} {
				when := map[bool]string{false: "after-pull", true: "before-pull"}[before]
				t.Run(fmt.Sprintf("writer-killed/pre-fork-server/%s/%dB/%dms", when, size, delay), func(t *testing.T) {
					t.Parallel()
					var ends [2]string
					for i, shim := range []bool{false, true} {
						ends[i] = killedWriter(t, a, bin, shim, writerCase{before: before, group: true, size: size, delay: delay})
					}
					if ends[0] != ends[1] {
						t.Errorf("the survivor's end: %s on kernel TCP, %s under the shim", ends[0], ends[1])
					}
				})
			}
		}
	}
	for _, size := range []int{1000, 1 << 20} {
		t.Run(fmt.Sprintf("writer-killed/acceptor-writes/%dB", size), func(t *testing.T) {
			t.Parallel()
			var ends [2]string
			for i, shim := range []bool{false, true} {
				ends[i] = killedWriter(t, a, bin, shim, writerCase{acceptorWrites: true, size: size})
			}
			if ends[0] != ends[1] {
				t.Errorf("the survivor's end: %s on kernel TCP, %s under the shim", ends[0], ends[1])
			}
		})
	}
	for _, size := range []int{1000, 1 << 20} {
		t.Run(fmt.Sprintf("writer-killed-with-unread-data/%dB", size), func(t *testing.T) {
			t.Parallel()
			var ends [2]string
			for i, shim := range []bool{false, true} {
				ends[i] = killedWriter(t, a, bin, shim, writerCase{unread: true, size: size})
			}
			if ends[0] != ends[1] {
				t.Errorf("the survivor's end: %s on kernel TCP, %s under the shim", ends[0], ends[1])
			}
		})
	}
	for _, serverDies := range []bool{true, false} {
		name := map[bool]string{true: "acceptor", false: "connector"}[serverDies]
		t.Run("reader-killed-with-unread-data/"+name, func(t *testing.T) {
			t.Parallel()
			var got [2]string
			for i, shim := range []bool{false, true} {
				got[i] = killedReader(t, a, bin, shim, serverDies)
			}
			if got[0] != got[1] {
				t.Errorf("the survivor's recv, send, recv: %s on kernel TCP, %s under the shim", got[0], got[1])
			}
		})
	}
}

// durablePair starts the two ends (the server's ACTION, the client's) and
// connects them; the server (a pre-fork one with group) has not accepted
// yet.
func durablePair(t *testing.T, a artefacts, bin string, shim, group bool, srvArgs, cliArgs []string) (srv, cli *proc, srvLog, cliLog string) {
	t.Helper()
	rd := runDir(t)
	logs := t.TempDir()
	srvLog, cliLog = filepath.Join(logs, "server.log"), filepath.Join(logs, "client.log")
	mode := map[bool]string{false: "server", true: "group-server"}[group]
	srv = startPiped(t, a.environ(t, side{shim: shim, log: srvLog}, rd), 60*time.Second, bin, append([]string{mode}, srvArgs...)...)
	var port struct{ Port int }
	waitJSON(t, srv, "port", &port)
	cli = startPiped(t, a.environ(t, side{shim: shim, log: cliLog}, rd), 60*time.Second, bin,
		append([]string{"client", fmt.Sprint(port.Port)}, cliArgs...)...)
	waitJSON(t, cli, "connected", nil)
	return srv, cli, srvLog, cliLog
}

// writerCase is one writer-killed case.
type writerCase struct {
	before         bool // the writer writes and dies before the acceptor accepts
	acceptorWrites bool // the acceptor is the writer
	unread         bool // the reader first sends the writer 100 bytes it never reads
	group          bool // a pre-fork server (the shim defers the connection)
	size, delay    int  // bytes written; ms from the last send to the SIGKILL
}

// killedWriter runs one writer-killed case and returns how the survivor's
// stream ended, after checking that it read exactly what the writer sent.
func killedWriter(t *testing.T, a artefacts, bin string, shim bool, c writerCase) string {
	t.Helper()
	before, acceptorWrites, unread := c.before, c.acceptorWrites, c.unread
	nb := "0"
	if before {
		nb = "1"
	}
	write := []string{"write", fmt.Sprint(c.size), fmt.Sprint(c.delay), nb}
	read := []string{"read"}
	if unread {
		write, read = append(write, "unread"), append(read, "100")
	}
	srvArgs, cliArgs := read, write
	if acceptorWrites {
		srvArgs, cliArgs = write, read
	}
	srv, cli, srvLog, cliLog := durablePair(t, a, bin, shim, c.group, srvArgs, cliArgs)
	writer, reader := cli, srv
	if acceptorWrites {
		writer, reader = srv, cli
	}
	if before {
		tell(t, cli)
		if err := cli.wait(); err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("shim %v: the writer did not die of its SIGKILL: %v\n%s", shim, err, cli.errb.String())
		}
		tell(t, srv)
	} else {
		tell(t, srv)
		waitJSON(t, srv, "accepted", nil)
		if shim && c.group {
			// The acceptor's read is the connection's first use: the
			// writer is told to write once the pull made it accelerated
			// (else it may die before anyone pulled: the before-pull case).
			waitLogLine(t, srvLog, "deferred connection claimed: accelerated")
		}
		tell(t, cli)
	}
	var sent struct {
		Sent uint64
		Sum  string
	}
	var got struct {
		Read     uint64
		Sum, End string
	}
	waitJSON(t, writer, "sent", &sent)
	if err := reader.wait(); err != nil {
		t.Fatalf("shim %v: the survivor: %v\n%s", shim, err, reader.errb.String())
	}
	waitJSON(t, reader, "read", &got)
	writer.wait()
	if unread && !shim {
		// Kernel TCP's reset may overtake the tail of the stream: the
		// survivor reads a prefix (how long one is a race), then the
		// error. The shim delivers all of it before the reset.
		if got.Read > sent.Sent {
			t.Errorf("kernel TCP: the survivor read %d bytes, more than the %d sent", got.Read, sent.Sent)
		}
		return got.End
	}
	if got.Read != sent.Sent || got.Sum != sent.Sum {
		t.Errorf("shim %v: the writer's sends returned %d bytes (sum %s); the survivor read %d (sum %s), then %s\nserver log:\n%s\nclient log:\n%s",
			shim, sent.Sent, sent.Sum, got.Read, got.Sum, got.End, tail(readLog(t, srvLog), 3000), tail(readLog(t, cliLog), 3000))
	}
	switch {
	case !shim:
	case c.group && !strings.Contains(readLog(t, cliLog), "deferred"):
		t.Errorf("the connection to the pre-fork server was not deferred:\n%s", readLog(t, cliLog))
	case c.group && !before && !strings.Contains(readLog(t, srvLog), "deferred connection claimed: accelerated"):
		t.Errorf("the deferred connection was not accelerated:\n%s", readLog(t, srvLog))
	case !c.group && !strings.Contains(readLog(t, srvLog), "accepted accelerated"):
		t.Errorf("the connection was not accelerated:\n%s", readLog(t, srvLog))
	}
	return got.End
}

// killedReader runs one reader-killed case: the writer sends 1000 bytes,
// the reader dies without reading them, and the writer probes.
func killedReader(t *testing.T, a artefacts, bin string, shim, serverDies bool) string {
	t.Helper()
	srvArgs, cliArgs := []string{"hold"}, []string{"writeprobe", "1000"}
	if !serverDies {
		srvArgs, cliArgs = cliArgs, srvArgs
	}
	srv, cli, srvLog, _ := durablePair(t, a, bin, shim, false, srvArgs, cliArgs)
	victim, survivor := srv, cli
	if !serverDies {
		victim, survivor = cli, srv
	}
	tell(t, srv)
	waitJSON(t, srv, "accepted", nil)
	tell(t, cli)
	waitJSON(t, survivor, "sent", nil)
	if err := victim.wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("shim %v: the reader did not die of its SIGKILL: %v\n%s", shim, err, victim.errb.String())
	}
	tell(t, survivor)
	if err := survivor.wait(); err != nil {
		t.Fatalf("shim %v: the survivor: %v\n%s", shim, err, survivor.errb.String())
	}
	var probe map[string]any
	line := waitJSON(t, survivor, "recv1", &probe)
	if shim && !strings.Contains(readLog(t, srvLog), "accepted accelerated") {
		t.Errorf("the connection was not accelerated:\n%s", readLog(t, srvLog))
	}
	return line
}

// tell writes a line to p's stdin (the program's cue to go on).
func tell(t *testing.T, p *proc) {
	t.Helper()
	if _, err := p.in.Write([]byte("go\n")); err != nil {
		t.Fatalf("cue: %v", err)
	}
}

// waitJSON waits for p's first output line with "key": and decodes it
// into v (unless nil); it returns the line. It fails when p ends first.
func waitJSON(t *testing.T, p *proc, key string, v any) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, l := range strings.Split(p.out.String(), "\n") {
			if strings.Contains(l, `"`+key+`":`) {
				if v != nil {
					if err := json.Unmarshal([]byte(l), v); err != nil {
						t.Fatalf("%q: %v", l, err)
					}
				}
				return l
			}
		}
		select {
		case err := <-p.done:
			p.done <- err
			if strings.Contains(p.out.String(), `"`+key+`":`) {
				continue
			}
			t.Fatalf("the program ended (%v) before printing %q:\n%s\n%s", err, key, p.out.String(), p.errb.String())
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q line after 30 s:\n%s\n%s", key, p.out.String(), p.errb.String())
		}
	}
}

// waitLogLine waits (up to 20 s) until the log at path holds line.
func waitLogLine(t *testing.T, path, line string) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); !strings.Contains(readLog(t, path), line); {
		if time.Now().After(end) {
			t.Fatalf("%q never came:\n%s", line, tail(readLog(t, path), 3000))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
