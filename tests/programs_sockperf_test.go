package tests

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// sockperf ping-pong (64 B) and throughput (16 KiB) against one sockperf
// server in each mode: no message lost, duplicated or out of order, every
// ping answered; one connection per client run.
//
// The ping-pong runs pass --mps: without it sockperf sizes its table of
// send times for at most 600,000 round trips a second and exits with
// "_seqN > m_maxSequenceNo" once a run goes faster, which an accelerated
// run does whenever both sides get a core (a 1.5 us round trip).
func TestProgramsSockperf(t *testing.T) {
	a := build(t)
	sockperf := need(t, "sockperf")
	counts := regexp.MustCompile(`\[Valid Duration\].*SentMessages=(\d+); ReceivedMessages=(\d+)`)
	rate := regexp.MustCompile(`Message Rate is (\d+)`)
	for _, m := range allModes {
		t.Run(m.name, func(t *testing.T) {
			r := newPairRun(t, a, m)
			port := freePort(t)
			srv := start(t, r.serverEnv(t), 60*time.Second, sockperf, "server", "--tcp", "-i", "127.0.0.1", "-p", fmt.Sprint(port))
			waitListen(t, srv, port)
			out := runTo(t, r.clientEnv(t), 30*time.Second, sockperf, "ping-pong", "--tcp", "-i", "127.0.0.1",
				"-p", fmt.Sprint(port), "-t", "1", "-m", "64", "--mps", "2000000")
			c := counts.FindStringSubmatch(out)
			if c == nil || c[1] != c[2] || c[1] == "0" || !regexp.MustCompile(`# dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0`).MatchString(out) {
				t.Fatalf("ping-pong: messages lost, duplicated or reordered:\n%s", tail(out, 25))
			}
			out = runTo(t, r.clientEnv(t), 30*time.Second, sockperf, "throughput", "--tcp", "-i", "127.0.0.1",
				"-p", fmt.Sprint(port), "-t", "1", "-m", "16384")
			if m := rate.FindStringSubmatch(out); m == nil {
				t.Fatalf("throughput: no message rate:\n%s", tail(out, 25))
			} else if n, _ := strconv.Atoi(m[1]); n == 0 {
				t.Fatalf("throughput: no message went through:\n%s", tail(out, 25))
			}
			r.checkPair(t, 2, false)
		})
	}
}
