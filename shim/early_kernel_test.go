package shim

import (
	"bytes"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/direct"
)

// TestKernelEarly: a pulled connection's early bytes go into the area,
// ahead of what the connector sends there next, and leave the kernel
// socket only when the claim takes them off (discardKernel); an offer
// whose count does not match what the socket holds (none included), or
// whose bytes do not fit, leaves them all where they were (the caller
// then abandons the area, whatever it holds).
func TestKernelEarly(t *testing.T) {
	const blocks, size = 4, 256
	capacity := blocks * (size - direct.HeaderSize)
	for _, tc := range []struct {
		name       string
		queued, e  int
		want       error
		inAreaWant int // -1: whatever fitted (the area is abandoned)
	}{
		{"exact", 700, 700, nil, 700},
		{"none", 0, 0, nil, 0},
		{"bytes where the offer says none", 10, 0, errEarlyExtra, 0},
		{"more queued than offered", 700, 600, errEarlyExtra, 0},
		{"fewer queued than offered", 500, 600, errEarlyMissing, 0},
		{"more than the area holds", capacity + 1, capacity + 1, errEarlyNoRoom, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := direct.NewArea(blocks, size, 1)
			if err != nil {
				t.Fatal(err)
			}
			conn, err := direct.Open(a, 1)
			if err != nil {
				t.Fatal(err)
			}
			connector, err := direct.Open(a, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { connector.Release(); conn.Free(); unix.Close(a.FD()) })
			sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Close(sp[0]); unix.Close(sp[1]) })
			early := randomBytes(tc.queued, 7)
			if n, err := unix.Write(sp[0], early); n != len(early) || err != nil {
				t.Fatalf("write: %d %v", n, err)
			}
			err = publishKernelEarly(sp[1], &directStream{conn: conn}, tc.e)
			if err != tc.want {
				t.Fatalf("publishKernelEarly: %v, want %v", err, tc.want)
			}
			if got := conn.Inq(); tc.inAreaWant >= 0 && got != tc.inAreaWant {
				t.Fatalf("area holds %d bytes, want %d", got, tc.inAreaWant)
			}
			if left, _ := unix.IoctlGetInt(sp[1], unix.SIOCINQ); left != tc.queued {
				t.Fatalf("kernel socket holds %d bytes, want all %d until the claim", left, tc.queued)
			}
			if tc.want != nil {
				return
			}
			if err := discardKernel(sp[1], tc.e); err != nil {
				t.Fatal(err)
			}
			if left, _ := unix.IoctlGetInt(sp[1], unix.SIOCINQ); left != 0 {
				t.Fatalf("kernel socket holds %d bytes after the claim took them", left)
			}
			if n, _, err := connector.Send([]byte("after"), false); n != 5 || err != nil {
				t.Fatalf("connector's send: %d %v", n, err)
			}
			got := make([]byte, tc.e+5)
			n := 0
			for n < len(got) {
				m, _, err := conn.Recv(got[n:], false, false)
				if err != nil {
					t.Fatalf("recv after %d: %v", n, err)
				}
				n += m
			}
			if !bytes.Equal(got, append(append([]byte{}, early...), "after"...)) {
				t.Fatal("the area's bytes differ from the early bytes and the connector's next send")
			}
		})
	}
}
