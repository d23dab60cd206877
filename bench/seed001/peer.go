package seed001

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/mux"
	"github.com/sdpshim/sdpshim/core/shm"
)

// peerEnv carries the child's Config (JSON); its absence means this
// process is not a child.
const peerEnv = "SDPSHIM_SEED001_PEER"

// peerFD is the child's end of the setup socket.
const peerFD = 3

// Each stream starts with a request header from the parent (headerLen
// bytes, little-endian): the operation, then three arguments.
const headerLen = 16

const (
	// opSink: read messages of arg1 bytes until EOF, then answer with the
	// bytes read and the monotonic time of the EOF (16 bytes).
	opSink uint32 = iota + 1
	// opBursts: arg2 times, read a burst of arg1 bytes (reads of
	// burstMsg bytes, after each whole message a pause of arg3 ns: a
	// paced consumer, as a link slower than memory) and answer with the
	// monotonic time it was complete (8 bytes); then wait for EOF.
	opBursts
)

var sharedProvider = sync.OnceValues(func() (*shm.Provider, error) { return shm.Open() })

// ServePeer makes this process a measurement's child when its
// environment says so: it serves the parent's streams until the parent
// closes the channel, then exits. Otherwise it returns at once. A program
// that runs Run calls it first thing (sdpshim from an init function, the
// tests from TestMain).
func ServePeer() {
	spec := os.Getenv(peerEnv)
	if spec == "" {
		return
	}
	if err := servePeer(spec); err != nil {
		fmt.Fprintln(os.Stderr, "seed001 peer:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

func servePeer(spec string) error {
	var c Config
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	ch, err := openChannel(peerFD, c)
	unix.Close(peerFD)
	if err != nil {
		return err
	}
	for {
		s, err := ch.Accept(time.Time{})
		if err != nil {
			return nil // the parent closed the channel
		}
		if err := serveStream(s); err != nil {
			return err
		}
	}
}

// serveStream carries out one stream's request.
func serveStream(s *mux.Stream) error {
	defer s.Close()
	var hdr [headerLen]byte
	if _, err := io.ReadFull(s, hdr[:]); err != nil {
		return fmt.Errorf("request: %w", err)
	}
	op := binary.LittleEndian.Uint32(hdr[0:])
	a1, a2 := int(binary.LittleEndian.Uint32(hdr[4:])), int(binary.LittleEndian.Uint32(hdr[8:]))
	a3 := time.Duration(binary.LittleEndian.Uint32(hdr[12:]))
	switch op {
	case opSink:
		buf := make([]byte, max(1, a1))
		var total int64
		for {
			n, err := s.Read(buf)
			total += int64(n)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("sink: %w", err)
			}
		}
		var ans [16]byte
		binary.LittleEndian.PutUint64(ans[0:], uint64(total))
		binary.LittleEndian.PutUint64(ans[8:], uint64(monoNow()))
		_, err := s.Write(ans[:])
		return err
	case opBursts:
		buf := make([]byte, burstMsg)
		for range a2 {
			for got, paced := 0, 0; got < a1; {
				n, err := s.Read(buf[:min(len(buf), a1-got)])
				if err != nil {
					return fmt.Errorf("burst: %w", err)
				}
				got += n
				for ; paced < got/burstMsg; paced++ {
					spin(a3)
				}
			}
			var ans [8]byte
			binary.LittleEndian.PutUint64(ans[:], uint64(monoNow()))
			if _, err := s.Write(ans[:]); err != nil {
				return err
			}
		}
		if _, err := s.Read(buf); !errors.Is(err, io.EOF) {
			return fmt.Errorf("bursts: want EOF, got %v", err)
		}
		return nil
	}
	return fmt.Errorf("unknown request %d", op)
}

// request writes a stream's request header.
func request(s *mux.Stream, op uint32, a1, a2, a3 int) error {
	var hdr [headerLen]byte
	binary.LittleEndian.PutUint32(hdr[0:], op)
	binary.LittleEndian.PutUint32(hdr[4:], uint32(a1))
	binary.LittleEndian.PutUint32(hdr[8:], uint32(a2))
	binary.LittleEndian.PutUint32(hdr[12:], uint32(a3))
	_, err := s.Write(hdr[:])
	return err
}

// peer is a running child and this side's end of its channel.
type peer struct {
	ch   *channel
	cmd  *exec.Cmd
	errs lockedBuffer // the child's stderr
	done chan error
}

// lockedBuffer is a bytes.Buffer safe for the writer goroutine of exec
// and a reader.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// text returns what was written, trimmed.
func (b *lockedBuffer) text() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(bytes.TrimSpace(b.buf.Bytes()))
}

// startPeer starts a child for c and connects to it.
func startPeer(c Config) (*peer, error) {
	spec, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	defer unix.Close(fds[0])
	child := os.NewFile(uintptr(fds[1]), "seed001-setup")
	p := &peer{cmd: exec.Command(exe), done: make(chan error, 1)}
	p.cmd.Env = append(os.Environ(), peerEnv+"="+string(spec))
	p.cmd.ExtraFiles = []*os.File{child}
	p.cmd.Stderr = &p.errs
	err = p.cmd.Start()
	child.Close()
	if err != nil {
		return nil, fmt.Errorf("start peer: %w", err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	if p.ch, err = openChannel(fds[0], c); err != nil {
		p.cmd.Process.Kill()
		<-p.done
		return nil, fmt.Errorf("%w (peer: %s)", err, p.errs.text())
	}
	return p, nil
}

// close ends the channel and waits for the child; an error is the
// child's failure.
func (p *peer) close() error {
	p.ch.Close()
	select {
	case err := <-p.done:
		if err != nil {
			return fmt.Errorf("peer: %w: %s", err, p.errs.text())
		}
		return nil
	case <-time.After(setupTimeout):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("peer did not exit after the channel closed")
	}
}

// fail adds the child's complaint, if any, to err.
func (p *peer) fail(err error) error {
	if msg := p.errs.text(); msg != "" {
		return fmt.Errorf("%w (peer: %s)", err, msg)
	}
	return err
}
