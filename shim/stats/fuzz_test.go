package stats

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strconv"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// A snapshot is what another process wrote on its stats socket, so any
// bytes at all. Decoding them gives a snapshot or an error, never a
// panic, and a snapshot decoded renders as exposition text that the
// Prometheus parser accepts (the agent's /metrics and `sdpshim stats
// --prom` serve it), whatever names and numbers it carries.
func FuzzSnapshot(f *testing.F) {
	reg := NewRegistry(Options{})
	c := reg.Open(ConnInfo{FD: 7, Local: netip.MustParseAddrPort("127.0.0.1:40000"),
		Peer: netip.MustParseAddrPort("127.0.0.1:6379"), PeerPID: 42, Transport: TransportSHM, Flow: "credit"})
	c.Sent(100)
	c.Received(50)
	c.Preempted()
	reg.Open(ConnInfo{FD: 8, Transport: TransportTCPFallback, Reason: 3})
	seed, err := json.Marshal(reg.Snapshot())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	v := strconv.Itoa(Version)
	for _, s := range []string{
		`{}`, `null`, `[]`, `{"version":` + v + `}`,
		`{"version":` + v + `,"process":{"comm":"a\"b\\\n{}=,","pid":-1}}`,
		`{"version":` + v + `,"conns":[{"fd":-5,"local":"::1","transport":"x\n# TYPE"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeSnapshot(b, "fuzz")
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := WriteProm(&out, []*Snapshot{s}); err != nil {
			t.Fatalf("WriteProm: %v", err)
		}
		parser := expfmt.NewTextParser(model.LegacyValidation)
		if _, err := parser.TextToMetricFamilies(bytes.NewReader(out.Bytes())); err != nil {
			t.Fatalf("the exposition does not parse: %v\n%s", err, out.Bytes())
		}
	})
}
