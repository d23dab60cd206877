package tests

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// An accelerated connection sent to another process in an SCM_RIGHTS
// message (tests/testdata/pass_fd.c): the holder's shim switches it to
// kernel TCP before the fd leaves (the pass hook), so the receiver, which
// reads the kernel socket, gets every byte the client sends after the
// first 64 and echoes them; the client checks each byte and the EOF. Done
// with each size of the unread backlog: none (64 bytes, the request alone), and 4 MiB sent at once (part
// of it in the holder's stream when the switch runs, replayed over TCP);
// and once with the fd sent by sendmmsg instead of sendmsg.
func TestPassAcceleratedFD(t *testing.T) {
	a, echo := forkEcho(t)
	prog := cbuild(t, "testdata/pass_fd.c")
	for _, tc := range []struct {
		size int
		send []string // the holder's extra argument
	}{{64, nil}, {4 << 20, nil}, {64, []string{"sendmmsg"}}} {
		size := tc.size
		t.Run(strings.Join(append([]string{fmt.Sprint(size)}, tc.send...), "-"), func(t *testing.T) {
			rd := runDir(t)
			logs := t.TempDir()
			path := filepath.Join(t.TempDir(), "pass.sock")
			holderLog := filepath.Join(logs, "holder.log")
			cliLog := filepath.Join(logs, "client.log")
			recv := start(t, a.environ(t, side{shim: true, log: filepath.Join(logs, "receiver.log")}, rd), 60*time.Second, prog, "receiver", path)
			waitLine(t, recv, "ready")
			holder := start(t, a.environ(t, side{shim: true, log: holderLog}, rd), 60*time.Second, prog, append([]string{"holder", path}, tc.send...)...)
			port := echoPort(t, holder)
			cli := start(t, a.environ(t, side{shim: true, log: cliLog}, rd), 60*time.Second, echo, "client", fmt.Sprint(port), fmt.Sprint(size), "7")
			if err := cli.wait(); err != nil || !strings.HasPrefix(cli.out.String(), fmt.Sprintf("ok %d", size)) {
				t.Fatalf("client: %v %q\n%s\nholder log:\n%s", err, cli.out.String(), cli.errb.String(), tail(readLog(t, holderLog), 20))
			}
			if err := holder.wait(); err != nil {
				t.Fatalf("holder: %v\n%s", err, holder.errb.String())
			}
			if err := recv.wait(); err != nil || !strings.HasPrefix(recv.out.String(), "ready\nok ") {
				t.Fatalf("receiver: %v %q\n%s", err, recv.out.String(), recv.errb.String())
			}
			hl, cl := readLog(t, holderLog), readLog(t, cliLog)
			if !strings.Contains(hl, "accepted accelerated") || !strings.Contains(hl, "connection switched to kernel TCP") {
				t.Errorf("holder: connection not accelerated then switched:\n%s", hl)
			}
			if !strings.Contains(cl, "connected accelerated") || !strings.Contains(cl, "switched to kernel TCP by its peer") {
				t.Errorf("client: connection not accelerated then switched:\n%s", cl)
			}
			noWarnings(t, hl+cl)
		})
	}
}

// waitLine waits for a line of p's output.
func waitLine(t *testing.T, p *proc, line string) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(line) + `$`)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if re.MatchString(p.out.String()) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no line %q from the program\n%s", line, p.errb.String())
}
