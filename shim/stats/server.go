package stats

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/fdhook"
	"github.com/sdpshim/sdpshim/core/rendezvous"
)

// Server serves a Registry's snapshots on the unix socket
// <RunDir>/stats-<pid>.sock (sockname.go): one JSON Snapshot per connection, then
// close. Clients are checked by SO_PEERCRED: root, the process's own uid
// and the uids in Allow are served; others are refused with a log line.
// Serving runs on the server's own goroutines; the data path never waits
// for it.
type Server struct {
	RunDir   string
	Allow    []uint32 // uids served besides root and the own uid
	Registry *Registry
	// Protect, when set, is called with every descriptor the server opens,
	// and Unprotect before it closes one: the shim marks them PROTECTED so
	// that the host program cannot close or reuse them.
	Protect, Unprotect func(fd int)
	// MaxClients bounds the clients served at once (default 4); one more
	// is closed at once and counted as overloaded.
	MaxClients int
	// Timeout bounds the write of one snapshot (default 1s).
	Timeout time.Duration
}

// Serve starts serving reg's snapshots on <rundir>/stats-<pid>.sock,
// creating rundir (mode 0700) when missing. allow lists uids served
// besides root and the own uid (SDPSHIM_ALLOW_UIDS). stop closes the
// socket, removes it and waits for the server's goroutines; it may be
// called more than once.
func Serve(rundir string, allow []uint32, reg *Registry) (stop func(), err error) {
	return (&Server{RunDir: rundir, Allow: allow, Registry: reg}).Start()
}

// Start is Serve with the server's settings.
func (s *Server) Start() (stop func(), err error) {
	if s.Registry == nil {
		return nil, errors.New("stats: no registry")
	}
	s = &Server{ // a copy: the caller may reuse s
		RunDir: s.RunDir, Allow: slices.Clone(s.Allow), Registry: s.Registry,
		Protect: s.Protect, Unprotect: s.Unprotect, MaxClients: s.MaxClients, Timeout: s.Timeout,
	}
	if err := rendezvous.EnsureRunDir(s.RunDir); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	SweepStale(s.RunDir)
	path := filepath.Join(s.RunDir, ownSockName())
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("stats: remove old socket: %w", err)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	if err := os.Chmod(path, socketMode(s.RunDir)); err != nil {
		l.Close()
		return nil, fmt.Errorf("stats: %w", err)
	}
	lfd := s.protect(l)
	max := s.MaxClients
	if max <= 0 {
		max = 4
	}
	var wg sync.WaitGroup
	var done atomic.Bool
	slots := make(chan struct{}, max)
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.acceptLoop(l, slots, &wg, &done)
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			done.Store(true)
			s.unprotect(lfd)
			l.Close() // also removes the socket file
			wg.Wait()
		})
	}, nil
}

func (s *Server) acceptLoop(l *net.UnixListener, slots chan struct{}, wg *sync.WaitGroup, done *atomic.Bool) {
	reg := s.Registry
	backoff := 5 * time.Millisecond
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			if done.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			if (errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE)) && fdhook.AtLimit(func() {
				// The process is at its fd limit: this client is served in
				// the spare fd's place, now.
				if c, err := l.AcceptUnix(); err == nil {
					s.serveOne(c)
				}
			}) {
				continue
			}
			// EMFILE and the like: say so, wait, retry; never spin.
			reg.log.WithError(err).Warn("stats: accept failed")
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		select {
		case slots <- struct{}{}:
		default:
			reg.server.overloaded.Add(1)
			c.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			s.serveOne(c)
		}()
	}
}

// serveOne checks the client's credentials and writes one snapshot.
func (s *Server) serveOne(c *net.UnixConn) {
	reg := s.Registry
	fd := s.protect(c)
	defer func() {
		s.unprotect(fd)
		c.Close()
	}()
	cred, err := peerCred(c)
	if err != nil {
		reg.log.WithError(err).Warn("stats: SO_PEERCRED failed; client closed")
		return
	}
	if !s.allowed(cred.Uid) {
		reg.server.refused.Add(1)
		reg.refusals.log(reg.log, cred.Pid, cred.Uid)
		return
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(reg.Snapshot()); err != nil {
		reg.log.WithError(err).Error("stats: encode snapshot")
		return
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = time.Second
	}
	c.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := c.Write(buf.Bytes()); err == nil {
		reg.server.served.Add(1)
	}
}

// allowed reports whether a client running as uid may read the stats.
func (s *Server) allowed(uid uint32) bool {
	return uid == 0 || int(uid) == os.Geteuid() || slices.Contains(s.Allow, uid)
}
