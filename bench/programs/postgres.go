package programs

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"
)

var reTPS = regexp.MustCompile(`tps = ([\d.]+) \((?:without initial connection time|including reconnection times)\)`)

// postgres runs pgbench -c 4 -j 2 for the run's duration against a
// postgres initialised once per run; as root, both run as nobody
// (postgres refuses root). A backend is forked per connection and claims
// it at its first use (deferred acceptance).
func (h *harness) postgres(m mode) (map[string]float64, error) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	if len(bins) == 0 {
		return nil, fmt.Errorf("postgresql is not installed (no /usr/lib/postgresql/*/bin)")
	}
	bin := bins[len(bins)-1]
	if err := h.pgInit(bin); err != nil {
		return nil, err
	}
	rd, port, err := h.pairAs(h.pgCred)
	if err != nil {
		return nil, err
	}
	srv, err := startServer(h.env.of(m, rd), h.pgCred, filepath.Join(bin, "postgres"), "-D", h.pgData, "-k", h.pgDir,
		"-h", "127.0.0.1", "-p", fmt.Sprint(port), "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=20")
	if err != nil {
		return nil, err
	}
	defer srv.stop(syscall.SIGINT)
	if err := srv.waitListen(port); err != nil {
		return nil, err
	}
	pg := []string{"-h", "127.0.0.1", "-p", fmt.Sprint(port), "-U", "postgres"}
	// Listening is not accepting: wait until recovery is done.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := runClient(h.env.of(kernel, rd), h.pgCred, 10*time.Second, filepath.Join(bin, "pg_isready"), append(pg, "-q")...); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("postgres not ready after 30 s\n%s", tailOf(srv.out.String()))
		}
	}
	if !h.pgReady {
		if _, err := runClient(h.env.of(kernel, rd), h.pgCred, h.limit(), filepath.Join(bin, "pgbench"), append(pg, "-i", "-q", "-s", map[bool]string{false: "4", true: "1"}[h.quick], "postgres")...); err != nil {
			return nil, err
		}
		h.pgReady = true
	}
	// pgbench runs one pgbench of the run's duration and returns its tps.
	pgbench := func(env []string, args ...string) (float64, error) {
		args = append(append(append([]string(nil), pg...), args...), "-c", "4", "-j", "2", "-T", fmt.Sprint(h.seconds()), "postgres")
		res, err := runClient(env, h.pgCred, h.limit(), filepath.Join(bin, "pgbench"), args...)
		if err != nil {
			return 0, err
		}
		t := reTPS.FindStringSubmatch(res)
		if t == nil {
			return 0, fmt.Errorf("pgbench %v: no tps in\n%s", args, tailOf(res))
		}
		return atof(t[1]), nil
	}
	// The backends that served the connections have exited by the time
	// the server could be asked (carried): the client's log says how its
	// connections went.
	clientLog := filepath.Join(filepath.Dir(rd), "pgbench.log")
	tps, err := pgbench(append(h.env.of(m, rd), "SDPSHIM_LOG_LEVEL=debug", "SDPSHIM_LOG_FILE="+clientLog))
	if err != nil {
		return nil, err
	}
	out, err := carriedLog(m, clientLog, map[string]float64{"pgbench.tps": tps})
	if err != nil {
		return nil, err
	}
	// A connection per transaction (-C): each one is set up, and a backend
	// forked for it. Under the default settings, which keep a program's
	// short-lived connections on kernel TCP after a few (the short-lived
	// rule): what such a program gets, not what acceleration costs.
	if out["pgbench.connect.tps"], err = pgbench(h.env.of(m, rd), "-C"); err != nil {
		return nil, err
	}
	return out, nil
}

// pgInit makes the run's database directory, owned by nobody when root.
func (h *harness) pgInit(bin string) error {
	if h.pgData != "" {
		return nil
	}
	dir, err := os.MkdirTemp(h.env.tmp, "pg")
	if err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			return err
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		h.pgCred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		for _, d := range []string{h.env.tmp, dir} {
			os.Chmod(d, 0o755)
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			return err
		}
	}
	data := filepath.Join(dir, "data")
	if _, err := runClient(h.env.of(kernel, ""), h.pgCred, h.limit(), filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"); err != nil {
		return err
	}
	h.pgDir, h.pgData = dir, data
	return nil
}
