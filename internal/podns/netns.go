package podns

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// InNetns runs f on a thread moved into network namespace ns, then moves
// the thread back before it serves other goroutines. The thread must go
// back rather than be dropped: the runtime cannot end the process's main
// thread, and a main thread left in another namespace changes what
// /proc/self/net shows the whole process.
func InNetns(ns string, f func()) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer unix.Close(home)
		fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
		}
		if err == nil {
			f()
			if unix.Setns(home, unix.CLONE_NEWNET) != nil {
				// Stuck elsewhere: the thread stays locked, and the
				// runtime ends it with this goroutine.
				errc <- nil
				return
			}
		}
		runtime.UnlockOSThread()
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
