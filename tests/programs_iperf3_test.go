package tests

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// iperf3 in each mode, client to server and server to client (-R): bytes
// flow, and the receiver never counts more than the sender sent. Each test is two
// connections (control and data).
func TestProgramsIperf3(t *testing.T) {
	a := build(t)
	iperf := need(t, "iperf3")
	for _, m := range allModes {
		t.Run(m.name, func(t *testing.T) {
			r := newPairRun(t, a, m)
			port := freePort(t)
			srv := start(t, r.serverEnv(t), 60*time.Second, iperf, "-s", "-B", "127.0.0.1", "-p", fmt.Sprint(port))
			waitListen(t, srv, port)
			for _, reverse := range []bool{false, true} {
				args := []string{"-c", "127.0.0.1", "-p", fmt.Sprint(port), "-t", "1", "-J"}
				if reverse {
					args = append(args, "-R")
				}
				var res struct {
					Error string `json:"error"`
					End   struct {
						Sent     struct{ Bytes uint64 } `json:"sum_sent"`
						Received struct{ Bytes uint64 } `json:"sum_received"`
					} `json:"end"`
				}
				out := runTo(t, r.clientEnv(t), 30*time.Second, iperf, args...)
				if err := json.Unmarshal([]byte(out), &res); err != nil || res.Error != "" {
					t.Fatalf("iperf3 -R=%v: %v %s\n%s", reverse, err, res.Error, tail(out, 20))
				}
				// Bytes still in flight when the timer ends are not
				// received (on kernel TCP too).
				if res.End.Received.Bytes == 0 || res.End.Received.Bytes > res.End.Sent.Bytes {
					t.Errorf("iperf3 -R=%v: sent %d bytes, received %d", reverse, res.End.Sent.Bytes, res.End.Received.Bytes)
				}
				t.Logf("iperf3 -R=%v: %d bytes in 1 s", reverse, res.End.Received.Bytes)
			}
			r.checkPair(t, 4, false)
		})
	}
}
