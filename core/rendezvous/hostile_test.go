package rendezvous

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/wait"
)

// TestHostileClients sends the listener's server broken and malicious
// requests: each one ends with a closed connection and a counter, never a
// crash, a hang or a leaked file, and the server keeps serving.
func TestHostileClients(t *testing.T) {
	checkNoLeak(t)
	p := newPair(t, Config{ReadTimeout: 50 * time.Millisecond})
	path := p.entry.Socket
	valid := message{kind: kindOffer, tuple: p.tuple(42000), pid: 1}
	frame := func(mut func(b []byte)) []byte {
		b := valid.encode()
		mut(b[4:])
		return b
	}
	bad := map[string]struct {
		bytes []byte
		files int
	}{
		"http":              {[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), 0},
		"huge length":       {[]byte{0xff, 0xff, 0xff, 0xff, 'S', 'D'}, 0},
		"short length":      {[]byte{4, 0, 0, 0, 'S', 'D', 'P', 'r'}, 0},
		"bad magic":         {frame(func(b []byte) { b[0] = 'X' }), 0},
		"version 9":         {frame(func(b []byte) { b[4] = 9 }), 0},
		"answer kind":       {frame(func(b []byte) { b[5] = byte(kindAnswer) }), 0},
		"unknown kind":      {frame(func(b []byte) { b[5] = 77 }), 0},
		"reason on offer":   {frame(func(b []byte) { b[6] = byte(ReasonTimeout) }), 0},
		"port 0":            {frame(func(b []byte) { b[24], b[25] = 0, 0 }), 0},
		"files unannounced": {valid.encode(), 2},
		"too many files":    {valid.encode(), MaxFiles + 4},
		"files, no data":    {nil, 3},
		"truncated":         {valid.encode()[:30], 0},
	}
	for name, c := range bad {
		fd := rawConn(t, path)
		if c.files > 0 {
			files := make([]int, c.files)
			for i := range files {
				files[i] = memfd(t, "junk")
			}
			b := c.bytes
			if len(b) == 0 {
				b = []byte{0}
			}
			if _, err := unix.SendmsgN(fd, b, unix.UnixRights(files...), nil, 0); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			closeFiles(files)
		} else if len(c.bytes) > 0 {
			unix.Write(fd, c.bytes)
		}
		if name == "truncated" || name == "empty" || name == "files, no data" {
			unix.Shutdown(fd, unix.SHUT_WR)
		}
		readToEOF(t, fd) // the server closes: at most a refusal first
		unix.Close(fd)
	}

	// Nothing at all, as a liveness probe (probeSocket) sends: closed, no
	// refusal, not counted as a bad request.
	empty := rawConn(t, path)
	unix.Shutdown(empty, unix.SHUT_WR)
	readToEOF(t, empty)
	unix.Close(empty)

	// Slowloris: a few bytes, then silence: cut at ReadTimeout.
	slow := rawConn(t, path)
	unix.Write(slow, []byte{60, 0})
	readToEOF(t, slow)
	unix.Close(slow)

	s := p.l.Stats()
	if s.BadRequests != uint64(len(bad)) || s.ReadTimeouts != 1 || s.Answered != 0 {
		t.Fatalf("stats: %d bad (want %d), %d timeouts, %d answered", s.BadRequests, len(bad), s.ReadTimeouts, s.Answered)
	}
	// Still serving.
	a := p.offer(t, p.tuple(42001), "ok")
	a.Commit()
	m, ok := p.claim(p.tuple(42001))
	if !ok {
		t.Fatal("valid offer after hostile ones not claimed")
	}
	m.Prepared.(*prepared).release()
}

// TestServerConnectionLimit checks that connections beyond MaxConns are
// closed at once instead of queueing goroutines.
func TestServerConnectionLimit(t *testing.T) {
	checkNoLeak(t)
	p := newPair(t, Config{MaxConns: 1, ReadTimeout: guard})
	held := rawConn(t, p.entry.Socket) // served, waiting for its request
	extra := rawConn(t, p.entry.Socket)
	readToEOF(t, extra)
	unix.Close(extra)
	unix.Close(held)
	if s := p.l.Stats(); s.Overloaded != 1 {
		t.Fatalf("Overloaded %d", s.Overloaded)
	}
}

// TestPeerShare checks that one process flooding a listener's rendezvous
// socket holds no more than half its slots: its further connections are
// refused at once, and another process's offer is still answered.
func TestPeerShare(t *testing.T) {
	checkNoLeak(t)
	p := newPair(t, Config{MaxConns: 4, ReadTimeout: 20 * time.Second})
	h := startHelper(t, roleFlood, "RV_SOCK="+p.entry.Socket, "RV_FLOOD=10")
	if got := h.line(t); got != "refused 8" {
		t.Fatalf("flooder: %q, want refused 8 (2 held: half of MaxConns 4)", got)
	}
	a := p.offer(t, p.tuple(40001), "after the flood")
	if string(a.Payload.Data) != "re:after the flood" {
		t.Fatalf("answer %q", a.Payload.Data)
	}
	if s := p.l.Stats(); s.PeerLimited != 8 || s.Overloaded != 0 {
		t.Fatalf("PeerLimited %d, Overloaded %d; want 8, 0", s.PeerLimited, s.Overloaded)
	}
}

// fakeListener serves one rendezvous connection: it reads the offer, then
// lets respond write whatever it likes.
func fakeListener(t *testing.T, respond func(fd int, req message)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fake.sock")
	lfd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(lfd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	unix.Listen(lfd, 4)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer unix.Close(lfd)
		fd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
		if err != nil {
			return
		}
		defer unix.Close(fd)
		body, files, err := recvFrame(fd, nil, time.Now().Add(guard))
		closeFiles(files)
		if err != nil {
			return
		}
		m, _ := decodeMessage(body)
		respond(fd, m)
	}()
	t.Cleanup(wg.Wait)
	return path
}

// TestHostileListener feeds the connector broken answers: each gives a
// FallbackError with the right reason, and no received file stays open.
func TestHostileListener(t *testing.T) {
	checkNoLeak(t)
	n := newNode(t, Config{RunDir: runDir(t)})
	tu := Tuple{Client: ap("127.0.0.1:43000"), Server: ap("127.0.0.1:5000")}
	send := func(fd int, m message, nfiles int) {
		files := make([]int, nfiles)
		for i := range files {
			files[i] = memfd(t, "junk")
		}
		sendFrame(fd, m.encode(), files, time.Now().Add(guard))
		closeFiles(files)
	}
	answer := func(req message) message { return message{kind: kindAnswer, tuple: req.tuple} }
	cases := map[string]struct {
		respond func(fd int, req message)
		want    Reason
	}{
		"garbage": {func(fd int, _ message) { unix.Write(fd, []byte("HTTP/1.1 400 Bad Request\r\n\r\n")) }, ReasonProtocol},
		"huge length": {func(fd int, _ message) {
			var b [8]byte
			binary.LittleEndian.PutUint32(b[:], 1<<31)
			unix.Write(fd, b[:])
		}, ReasonProtocol},
		"other tuple": {func(fd int, req message) {
			m := answer(req)
			m.tuple.Client = ap("127.0.0.1:1")
			send(fd, m, 0)
		}, ReasonProtocol},
		"unannounced files": {func(fd int, req message) { send(fd, answer(req), 3) }, ReasonProtocol},
		"too many files": {func(fd int, req message) {
			m := answer(req)
			m.nfiles = MaxFiles
			send(fd, m, MaxFiles+5)
		}, ReasonProtocol},
		"offer kind": {func(fd int, req message) { send(fd, req, 0) }, ReasonProtocol},
		"refusal, unknown reason": {func(fd int, req message) {
			send(fd, message{kind: kindRefusal, reason: 200}, 0)
		}, ReasonProtocol},
		"refusal": {func(fd int, req message) {
			send(fd, message{kind: kindRefusal, reason: ReasonUnsupportedOption, data: []byte("no")}, 0)
		}, ReasonUnsupportedOption},
		"close":   {func(int, message) {}, ReasonPeerGone},
		"half":    {func(fd int, req message) { unix.Write(fd, answer(req).encode()[:20]) }, ReasonPeerGone},
		"silence": {func(fd int, _ message) { wait.WaitFD(fd, unix.POLLIN, time.Now().Add(guard)) }, ReasonTimeout},
	}
	for name, c := range cases {
		path := fakeListener(t, c.respond)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := n.Offer(ctx, Entry{Socket: path}, tu, Payload{Data: []byte(name)})
		cancel()
		if ReasonOf(err) != c.want {
			t.Errorf("%s: %v, want %s", name, err, c.want)
		}
	}
}
