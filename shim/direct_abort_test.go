package shim

import (
	"bytes"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A peer that breaks the protocol (here: a block header with an unknown
// flag, written over a published block): the reader gets ECONNRESET, and
// the connection's end is counted and logged at warn with its reason.
func TestDirectViolationCounted(t *testing.T) {
	p, h := newProcess(t, "SDPSHIM_LOG_LEVEL=warn")
	var logged bytes.Buffer
	p.log.SetOutput(&logged)
	c, a := pair(t, p, h)
	ds := p.lookup(a).direct()
	if ds == nil {
		t.Skip("not on the direct path")
	}
	marker := []byte("a block whose header the test corrupts")
	if n := call(t, func(done int, w *Wait) int64 { return p.Send(c, marker[done:], 0, w) }); n != int64(len(marker)) {
		t.Fatalf("send: %d", n)
	}
	// The handle (struct sdp_dconn) starts with the area's address and
	// size; a block's 16-byte header (stream, seq, len, flags) comes just
	// before its payload.
	hd := ds.conn.Ptr()
	area := unsafe.Slice((*byte)(*(*unsafe.Pointer)(hd)), *(*uintptr)(unsafe.Add(hd, unsafe.Sizeof(uintptr(0)))))
	at := bytes.Index(area, marker)
	if at < 16 {
		t.Fatalf("payload not found in the area (at %d)", at)
	}
	copy(area[at-4:at], []byte{0xef, 0xbe, 0xad, 0xde}) // flags: none is defined
	buf := make([]byte, 64)
	if r := call(t, func(done int, w *Wait) int64 { return p.Recv(a, buf, 0, w) }); r != -int64(unix.ECONNRESET) {
		t.Fatalf("recv of a corrupt block: %d, want -ECONNRESET", r)
	}
	p.Close(a)
	if n := p.stats.Events()[abortProtocol]; n != 1 {
		t.Errorf("%s counted %d times, want 1 (events %v)", abortProtocol, n, p.stats.Events())
	}
	if l := logged.String(); !strings.Contains(l, "level=warning") || !strings.Contains(l, "broke the protocol") {
		t.Errorf("no warning about the violation in the log:\n%s", l)
	}
}
