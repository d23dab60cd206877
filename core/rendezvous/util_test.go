package rendezvous

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/fdhook"
)

// guard bounds every wait in the tests, so a broken implementation fails
// instead of hanging. It is never a timing assertion.
const guard = 20 * time.Second

func runDir(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "rd")
}

// drops records OnDrop calls.
type drops struct {
	mu  sync.Mutex
	got []DropCause
	ch  chan DropCause
}

func newDrops() *drops { return &drops{ch: make(chan DropCause, 1024)} }

func (d *drops) onDrop(m Match, c DropCause) {
	if p, ok := m.Prepared.(*prepared); ok {
		p.release()
	}
	d.mu.Lock()
	d.got = append(d.got, c)
	d.mu.Unlock()
	d.ch <- c
}

func (d *drops) wait(t *testing.T) DropCause {
	t.Helper()
	select {
	case c := <-d.ch:
		return c
	case <-time.After(guard):
		t.Fatal("no drop reported")
		return 0
	}
}

// prepared is what the test handler keeps with a pending entry: the
// offer's data and the answer's file, which it owns.
type prepared struct {
	data string
	file int
	once sync.Once
}

func (p *prepared) release() { p.once.Do(func() { unix.Close(p.file) }) }

// echoHandler accepts every offer: it closes the offer's files, answers
// with "re:" + data and one memfd, and keeps the memfd as prepared.
func echoHandler(req Request) (Payload, any, error) {
	closeFiles(req.Payload.Files)
	fd, err := unix.MemfdCreate("rendezvous-answer", unix.MFD_CLOEXEC)
	if err != nil {
		return Payload{}, nil, err
	}
	unix.Pwrite(fd, []byte("answer"), 0)
	p := &prepared{data: string(req.Payload.Data), file: fd}
	return Payload{Data: append([]byte("re:"), req.Payload.Data...), Files: []int{fd}}, p, nil
}

// newNode returns a Node closed when the test ends.
func newNode(t *testing.T, cfg Config) *Node {
	t.Helper()
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func memfd(t testing.TB, content string) int {
	fd, err := unix.MemfdCreate("rendezvous-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Pwrite(fd, []byte(content), 0); err != nil {
		t.Fatal(err)
	}
	return fd
}

func fdContent(t testing.TB, fd int) string {
	buf := make([]byte, 256)
	n, err := unix.Pread(fd, buf, 0)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// wantReason fails t unless err is a *FallbackError with reason r.
func wantReason(t *testing.T, err error, r Reason) {
	t.Helper()
	var fe *FallbackError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v is not a *FallbackError (want %s)", err, r)
	}
	if fe.Reason != r {
		t.Fatalf("reason %s (%v), want %s", fe.Reason, err, r)
	}
}

func lookupOne(t *testing.T, n *Node, dst netip.AddrPort) Entry {
	t.Helper()
	es, err := n.Lookup(dst)
	if err != nil {
		t.Fatalf("lookup %s: %v", dst, err)
	}
	if len(es) != 1 {
		t.Fatalf("lookup %s: %d entries %v", dst, len(es), es)
	}
	return es[0]
}

func offerCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), guard)
}

func sockaddrAP(sa unix.Sockaddr) netip.AddrPort {
	switch s := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(s.Addr), uint16(s.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(s.Addr), uint16(s.Port))
	}
	return netip.AddrPort{}
}

// rawConn connects a plain unix socket to path, with the guard as its
// receive timeout.
func rawConn(t *testing.T, path string) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval(guard.Nanoseconds())
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	return fd
}

// readToEOF reads fd until the peer closes; it fails on the guard timeout.
func readToEOF(t *testing.T, fd int) []byte {
	t.Helper()
	var out []byte
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4*64))
	for {
		n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if oobn > 0 {
			fds, _ := fdhook.Rights(oob[:oobn])
			closeFiles(fds)
		}
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			t.Fatal("peer did not close the connection")
		}
		if err != nil || n == 0 {
			return out
		}
		out = append(out, buf[:n]...)
	}
}
