package stats

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// Endpoint is one process's stats socket.
type Endpoint struct {
	// PID is the process's pid in its own pid namespace, PIDNS that
	// namespace's inode (sockname.go).
	PID   int
	PIDNS uint64
	Path  string
}

// List returns the stats sockets in rundir of processes that still
// exist, by pid. Sockets of dead processes are skipped (the next server
// started in that directory removes them). A missing rundir is no error:
// no process runs the shim.
func List(rundir string) ([]Endpoint, error) {
	ents, err := os.ReadDir(rundir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Endpoint
	for _, e := range ents {
		pid, ns, ok := parseSockName(e.Name())
		path := filepath.Join(rundir, e.Name())
		if !ok || e.Type()&os.ModeSocket == 0 || !live(path, pid, ns) {
			continue
		}
		out = append(out, Endpoint{PID: pid, PIDNS: ns, Path: path})
	}
	slices.SortFunc(out, func(a, b Endpoint) int { return a.PID - b.PID })
	return out, nil
}

// ErrStale is returned by Fetch for a socket nobody serves: its process
// died, or its pid now belongs to another process.
var ErrStale = errors.New("stale stats socket")

// maxSnapshot bounds a snapshot read (about 200 bytes per connection).
const maxSnapshot = 64 << 20

// Fetch reads one snapshot from the stats socket at path, within timeout.
// A refused client (SO_PEERCRED, or too many clients at once) sees the
// server close without a byte: an error saying so.
func Fetch(path string, timeout time.Duration) (*Snapshot, error) {
	s, _, err := FetchPID(path, timeout)
	return s, err
}

// FetchPID is Fetch that also returns the serving process's pid as the
// caller's pid namespace sees it (SO_PEERCRED), which differs from the
// snapshot's own pid for a process of a nested pid namespace (a
// container's); 0 when the caller cannot see that process's namespace.
//
// A connection the process closed without a snapshot is tried once more:
// besides a refusal, that is how a program that closes an fd number twice
// (iperf3 does, at the end of each test) hits the process's stats server,
// whose connection held that number for the microseconds before it is
// moved out of the program's reach (protected).
func FetchPID(path string, timeout time.Duration) (*Snapshot, int, error) {
	s, pid, err := fetchOnce(path, timeout)
	if errors.Is(err, errNoSnapshot) {
		s, pid, err = fetchOnce(path, timeout)
	}
	return s, pid, err
}

// errNoSnapshot: the server closed the connection without writing.
var errNoSnapshot = errors.New("closed without a snapshot (this uid is not allowed, or the process is busy with other clients)")

func fetchOnce(path string, timeout time.Duration) (*Snapshot, int, error) {
	c, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
			return nil, 0, fmt.Errorf("%s: %w", path, ErrStale)
		}
		return nil, 0, err
	}
	defer c.Close()
	pid := 0
	if cred, err := peerCred(c.(*net.UnixConn)); err == nil {
		pid = int(cred.Pid)
	}
	s, err := readSnapshot(c, path, timeout)
	return s, pid, err
}

func readSnapshot(c net.Conn, path string, timeout time.Duration) (*Snapshot, error) {
	c.SetReadDeadline(time.Now().Add(timeout))
	b, err := io.ReadAll(io.LimitReader(c, maxSnapshot))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("%s: %w", path, errNoSnapshot)
	}
	return decodeSnapshot(b, path)
}

// decodeSnapshot decodes what a process's stats socket wrote: bytes of
// another process, so anything at all; a snapshot of this version, or an
// error naming path.
func decodeSnapshot(b []byte, path string) (*Snapshot, error) {
	var s Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: bad snapshot: %w", path, err)
	}
	if s.Version != Version {
		return nil, fmt.Errorf("%s: snapshot version %d, this sdpshim reads version %d", path, s.Version, Version)
	}
	return &s, nil
}
