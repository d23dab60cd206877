package probes

import (
	"net/netip"
	"testing"
)

func TestClassify(t *testing.T) {
	ap := netip.MustParseAddrPort
	pair := func(pidA, pidB uint32, a, b string, cookieA, cookieB uint64) []ConnBytes {
		return []ConnBytes{
			{PID: pidA, Cookie: cookieA, Tuple: Tuple{ap(a), ap(b)}, Sent: 10},
			{PID: pidB, Cookie: cookieB, Tuple: Tuple{ap(b), ap(a)}, Received: 10},
		}
	}
	var conns []ConnBytes
	conns = append(conns, pair(1, 2, "127.0.0.1:40000", "127.0.0.1:6379", 11, 12)...) // neither shimmed
	conns = append(conns, pair(3, 4, "127.0.0.1:40001", "127.0.0.1:6380", 13, 14)...) // 3 fell back, 4 plain
	conns = append(conns, pair(5, 6, "127.0.0.1:40002", "127.0.0.1:6381", 15, 16)...) // accelerated, leaking
	conns = append(conns, ConnBytes{PID: 7, Cookie: 17, Tuple: Tuple{ap("10.0.0.1:5000"), ap("192.0.2.9:80")}, Sent: 5})
	conns[4].SentAccel = 10 // pid 5 kept writing to kernel TCP after acceleration
	f := Facts{
		Accelerated: map[uint64]bool{15: true, 16: true},
		Fallbacks:   map[uint64]int{13: 1},
		Shimmed:     func(pid uint32) bool { return pid == 3 || pid == 5 || pid == 6 },
		IsLocal:     func(a netip.Addr) bool { return a.IsLoopback() },
	}
	rows := Classify(conns, []SockState{{Cookie: 11, State: TCPEstablished}}, f)
	want := []struct {
		pid     uint32
		verdict Verdict
		peer    uint32
	}{
		{5, VerdictSilentFallback, 6},
		{1, VerdictCandidate, 2}, {2, VerdictCandidate, 1}, {4, VerdictCandidate, 3},
		{3, VerdictFallback, 4},
		{6, VerdictAccelerated, 5},
		{7, VerdictRemote, 0},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i, w := range want {
		r := rows[i]
		if r.PID != w.pid || r.Verdict != w.verdict || r.PeerPID != w.peer {
			t.Errorf("row %d: pid %d %v peer %d; want pid %d %v peer %d", i, r.PID, r.Verdict, r.PeerPID, w.pid, w.verdict, w.peer)
		}
	}
	if rows[4].Reason != 1 || rows[1].State != TCPEstablished || !rows[1].OnHost || rows[6].OnHost {
		t.Errorf("reason %d, state %d, on host %v/%v", rows[4].Reason, rows[1].State, rows[1].OnHost, rows[6].OnHost)
	}
}
