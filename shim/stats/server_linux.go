package stats

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// SweepStale removes the stats sockets in dir of processes that no
// longer exist (a server does it when it starts; the node agent does it
// for the whole node) and returns how many it removed.
func SweepStale(dir string) int {
	names, _ := filepath.Glob(filepath.Join(dir, "stats-*.sock"))
	removed := 0
	for _, p := range names {
		if pid, ns, ok := parseSockName(filepath.Base(p)); ok && !live(p, pid, ns) && os.Remove(p) == nil {
			removed++
		}
	}
	return removed
}

// rawConn is what net's unix listener and connections share.
type rawConn interface {
	SyscallConn() (syscall.RawConn, error)
}

func fdOf(c rawConn) int {
	fd := -1
	if rc, err := c.SyscallConn(); err == nil {
		rc.Control(func(f uintptr) { fd = int(f) })
	}
	return fd
}

func (s *Server) protect(c rawConn) int {
	if s.Protect == nil {
		return -1
	}
	fd := fdOf(c)
	if fd >= 0 {
		s.Protect(fd)
	}
	return fd
}

func (s *Server) unprotect(fd int) {
	if s.Unprotect != nil && fd >= 0 {
		s.Unprotect(fd)
	}
}

// peerCred returns the SO_PEERCRED credentials of a connected client.
func peerCred(c rawConn) (*unix.Ucred, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if cerr == nil && cred == nil {
		cerr = errors.New("no credentials")
	}
	return cred, cerr
}

// refusalLog writes one line per refused client, at most one a second;
// the lines left out are counted in the next.
type refusalLog struct {
	mu      sync.Mutex
	last    time.Time
	skipped int
}

func (r *refusalLog) log(log logrus.FieldLogger, pid int32, uid uint32) {
	r.mu.Lock()
	now := time.Now()
	if now.Sub(r.last) < time.Second {
		r.skipped++
		r.mu.Unlock()
		return
	}
	skipped := r.skipped
	r.last, r.skipped = now, 0
	r.mu.Unlock()
	e := log.WithFields(logrus.Fields{"client_pid": pid, "client_uid": uid})
	if skipped > 0 {
		e = e.WithField("refused_since_last_line", skipped)
	}
	e.Warn("stats: client refused: uid not allowed (own uid, root and SDPSHIM_ALLOW_UIDS are)")
}
