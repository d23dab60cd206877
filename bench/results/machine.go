package results

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// Machine describes the host a run measured.
type Machine struct {
	Cores    int    `json:"cores"`     // CPUs usable by the process
	CPUModel string `json:"cpu_model"` // /proc/cpuinfo's model name
	Kernel   string `json:"kernel"`    // e.g. "Linux 6.18.44"
	Arch     string `json:"arch"`      // GOARCH
	// MemoryGiB is the total memory, 0 when unknown.
	MemoryGiB float64 `json:"memory_gib"`
}

// ThisMachine describes the running host from /proc; what it cannot
// read is left empty.
func ThisMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), Arch: runtime.GOARCH}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	var kib float64
	if _, err := fmt.Sscanf(procField("/proc/meminfo", "MemTotal"), "%f", &kib); err == nil {
		m.MemoryGiB = kib / (1 << 20)
	}
	return m
}

// String is the machine in one line, for a plot's caption.
func (m Machine) String() string {
	s := fmt.Sprintf("%d cores", m.Cores)
	if m.CPUModel != "" {
		s += " " + m.CPUModel
	}
	if m.Kernel != "" {
		s += ", " + m.Kernel
	}
	return s
}

// procField returns the value of the first "name : value" line of a
// /proc file, "" when there is none.
func procField(path, name string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Build returns the running executable's module version and commit: the
// vcs.revision stamped into the build where there is one, else what
// `git rev-parse HEAD` says in the working directory, else "unknown".
func Build() (version, commit string) {
	version, commit = "unknown", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = bi.Main.Version
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				commit = s.Value
			}
		}
	}
	if commit == "" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output(); err == nil {
			commit = string(bytes.TrimSpace(out))
		}
	}
	if commit == "" {
		commit = "unknown"
	}
	return version, commit
}
