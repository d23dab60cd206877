package podns

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Proc says how a program runs in a pod.
type Proc struct {
	UID    int
	Groups []int    // supplementary groups; nil: none
	Shim   bool     // LD_PRELOAD the interposer
	Env    []string // extra NAME=VALUE
	Log    string   // SDPSHIM_LOG_FILE (debug) when shimmed
	CPUs   string   // taskset's CPU list the program runs on; "": any
}

// Command returns the command that runs name with args in the pod as pp
// says: its network namespace, new pid and mount namespaces (with /proc
// of the new pid namespace and the run directory bind-mounted), the
// pod's uid and groups, and the shim's environment for that program
// alone, on the CPUs pp names. Killing the command's process (unshare
// --kill-child) takes the program's pid namespace down with it.
func (p Pod) Command(pp Proc, name string, args ...string) *exec.Cmd {
	c := p.C
	groups := "--clear-groups"
	if len(pp.Groups) > 0 {
		var gs []string
		for _, g := range pp.Groups {
			gs = append(gs, strconv.Itoa(g))
		}
		groups = "--groups=" + strings.Join(gs, ",")
	}
	env := []string{"SDPSHIM_RUNDIR=" + c.PodRD}
	if pp.Shim {
		env = append(env, "LD_PRELOAD="+c.Lib)
		if pp.Log != "" {
			env = append(env, "SDPSHIM_LOG_LEVEL=debug", "SDPSHIM_LOG_FILE="+pp.Log)
		}
	}
	env = append(env, pp.Env...)
	// setpriv's change of uid clears the parent-death signal unshare
	// --kill-child set (the kernel does at any change of credentials):
	// --pdeathsig sets it again, so that the program dies with unshare.
	script := `mount --bind "$1" "$2" && u=$3 g=$4 && shift 4 && exec setpriv --reuid="$u" --regid="$u" "$g" --pdeathsig KILL -- env "$@"`
	full := append([]string{"netns", "exec", p.NS, "unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--",
		"sh", "-c", script, "pod", c.HostRD, c.PodRD, strconv.Itoa(pp.UID), groups}, env...)
	full = append(full, name)
	full = append(full, args...)
	cmd := exec.Command("ip", full...)
	if pp.CPUs != "" {
		// Affinity is inherited through every step to the program.
		cmd = exec.Command("taskset", append([]string{"-c", pp.CPUs, "ip"}, full...)...)
	}
	cmd.Env = CleanEnv()
	return cmd
}

// CleanEnv is this process's environment without the shim's variables.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LD_PRELOAD=") && !strings.HasPrefix(kv, "SDPSHIM_") {
			env = append(env, kv)
		}
	}
	return env
}
