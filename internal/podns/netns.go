package podns

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// InNetns runs f on a thread moved into network namespace ns; the thread
// is never handed back to other goroutines (it ends with f's goroutine).
func InNetns(ns string, f func()) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread exits with this goroutine
		fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
		}
		if err == nil {
			f()
		}
		errc <- err
	}()
	return <-errc
}

// RemoveStale deletes the network namespaces named <tag><pid>-* whose
// process pid is gone: those of earlier runs that died before Close.
func RemoveStale(tag string) {
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), tag)
		pid, _, ok2 := strings.Cut(rest, "-")
		n, err := strconv.Atoi(pid)
		if !ok || !ok2 || err != nil || n == os.Getpid() {
			continue
		}
		if unix.Kill(n, 0) == unix.ESRCH {
			exec.Command("ip", "netns", "del", e.Name()).Run()
		}
	}
}
