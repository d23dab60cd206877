package shim

import (
	"bytes"
	"os"
	"strconv"
)

// processStart returns the start time of pid (field 22 of /proc/PID/stat,
// clock ticks after boot), 0 when unreadable. With the pid it names a
// process across pid reuse (the rendezvous registry does the same).
func processStart(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return 0
	}
	v, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return 0
	}
	return v
}
