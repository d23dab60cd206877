package rendezvous

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
)

func TestMessageRoundTrip(t *testing.T) {
	for _, m := range []message{
		{kind: kindOffer, nfiles: 3, tuple: Tuple{ap("127.0.0.1:40000"), ap("127.0.0.1:80")}, pid: 77, data: []byte("payload")},
		{kind: kindAnswer, tuple: Tuple{ap("[::1]:1"), ap("[fe80::1]:65535")}, data: []byte{}},
		{kind: kindRefusal, reason: ReasonTimeout, tuple: Tuple{ap("0.0.0.0:9"), ap("10.0.0.1:9")}, data: []byte("busy")},
		{kind: kindOfferCommitted, nfiles: 1, tuple: Tuple{ap("127.0.0.1:0"), ap("127.0.0.1:80")}, pid: 9, sock: 123456, data: []byte("o")},
	} {
		b := m.encode()
		got, err := decodeMessage(b[4:])
		if err != nil {
			t.Fatal(err)
		}
		if got.kind != m.kind || got.reason != m.reason || got.nfiles != m.nfiles || got.tuple != m.tuple ||
			got.pid != m.pid || got.sock != m.sock || !bytes.Equal(got.data, m.data) {
			t.Fatalf("round trip: %+v -> %+v", m, got)
		}
	}
}

// FuzzDecodeMessage: any bytes decode or fail cleanly, and what decodes
// re-encodes to the same bytes.
func FuzzDecodeMessage(f *testing.F) {
	f.Add(message{kind: kindOffer, tuple: Tuple{ap("127.0.0.1:1"), ap("127.0.0.1:2")}, data: []byte("x")}.encode()[4:])
	f.Add(message{kind: kindOfferCommitted, tuple: Tuple{ap("127.0.0.1:0"), ap("127.0.0.1:2")}, sock: 77}.encode()[4:])
	f.Add([]byte("SDPr\x02\x03\x02\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMessage(b)
		if err != nil {
			if !errors.Is(err, errMessage) {
				t.Fatalf("error %v does not wrap errMessage", err)
			}
			return
		}
		if len(m.data) > MaxData || m.nfiles > MaxFiles {
			t.Fatalf("bounds: %d bytes, %d files", len(m.data), m.nfiles)
		}
		if again := m.encode()[4:]; !bytes.Equal(again[:8], b[:8]) || !bytes.Equal(again[headerLen:], b[headerLen:]) {
			t.Fatalf("re-encode differs")
		}
	})
}

func FuzzParseEntryFile(f *testing.F) {
	good := entryFile{port: 80, owner: owner{pid: 12, start: 34, uid: 1000, pidns: "pid:[1]",
		socket: "/rd/" + sockName(12, 5)}, listens: []netip.AddrPort{ap("0.0.0.0:80")}}
	f.Add(string(good.encode()))
	f.Add("sdpshim-rendezvous 1\npid 12\n")
	f.Fuzz(func(t *testing.T, s string) {
		e, err := parseEntryFile("/rd", entryName(80, 12, 34, 1), []byte(s))
		if err != nil {
			return
		}
		if e.pid != 12 || e.start != 34 || len(e.listens) == 0 || len(e.listens) > maxEntryListens {
			t.Fatalf("accepted %+v", e)
		}
		for _, l := range e.listens {
			if l.Port() != 80 {
				t.Fatalf("accepted %s on port 80", l)
			}
		}
	})
}

func TestReasonNames(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range append(Reasons(), ReasonNone) {
		name := r.String()
		if name == "" || strings.HasPrefix(name, "reason-") || seen[name] {
			t.Fatalf("reason %d: name %q", r, name)
		}
		seen[name] = true
	}
	if Reason(200).String() != "reason-200" || Reason(200).Valid() {
		t.Fatal("unknown reason")
	}
	err := fmt.Errorf("dial: %w", &FallbackError{Reason: ReasonExcluded, Err: errors.New("rule 3")})
	if ReasonOf(err) != ReasonExcluded || ReasonOf(nil) != ReasonNone {
		t.Fatal("ReasonOf")
	}
}

// TestReasonsDocumented keeps docs/reasons.md in step with the constants:
// every reason has its row "| code | `name` | `Constant` |".
func TestReasonsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/reasons.md")
	if err != nil {
		t.Fatal(err)
	}
	consts := []string{"", "ReasonNotShimmed", "ReasonRefused", "ReasonTimeout", "ReasonProtocol", "ReasonRunDir",
		"ReasonExcluded", "ReasonNoDevice", "ReasonUnsupportedOption", "ReasonForkDecline", "ReasonBadSetting", "ReasonPeerGone",
		"ReasonDeferredUnclaimed", "ReasonDeferredPlain", "ReasonShortLived", "ReasonFDLimit", "ReasonConnectorLate"}
	if len(consts) != int(numReasons) {
		t.Fatalf("test lists %d constants, package has %d", len(consts), numReasons)
	}
	for _, r := range Reasons() {
		row := fmt.Sprintf("| %d | `%s` | `%s` |", r, r, consts[r])
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/reasons.md lacks %q", row)
		}
	}
}

// A deferred-acceptance record is a file another process wrote in the run
// directory, and its name too. Whatever they hold, parsing gives an error
// or a value that survives its own encoding: a record accepted, written
// again and read again, is the same record; a name accepted names a tuple
// whose name reads back as that tuple, and a pending record's name
// (unboundrec.go) is exactly the name of the server it reads as.
func FuzzParseRecord(f *testing.F) {
	tu := Tuple{Client: ap("127.0.0.1:40000"), Server: ap("127.0.0.1:80")}
	good := recordFile{owner: owner{pid: 12, start: 34, uid: 1000, pidns: "pid:[1]", netns: "net:[2]",
		socket: "/rd/" + sockName(12, 5)}, nonce: [16]byte{1, 2, 3}}
	f.Add(string(good.encode()), recordName(tu))
	f.Add("sdpshim-deferred 1\npid 12\n", natRecordName(tu.Client))
	f.Add(string(good.encode()), pendingRecordName(tu.Server, 12, 0xbeef))
	f.Fuzz(func(t *testing.T, body, name string) {
		if srv, _, ok := parsePendingRecordName(name); ok {
			if _, rec := parseRecordName(name); rec || srv != canon(srv) || srv.Port() == 0 {
				t.Fatalf("pending name %q read as server %v (also a record's name: %v)", name, srv, rec)
			}
		}
		if tu, ok := parseRecordName(name); ok {
			again := natRecordName(tu.Client)
			if tu.Server.IsValid() {
				again = recordName(tu)
			}
			if back, ok := parseRecordName(again); !ok || back != tu {
				t.Fatalf("name %q read as %+v, whose name %q reads as %+v (%v)", name, tu, again, back, ok)
			}
		}
		r, err := parseRecordFile("/rd", name, []byte(body))
		if err != nil {
			return
		}
		if back, err := parseRecordFile("/rd", name, r.encode()); err != nil || back != r {
			t.Fatalf("accepted %+v, which reads back as %+v (%v)", r, back, err)
		}
	})
}
