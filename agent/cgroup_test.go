package agent

import (
	"strings"
	"testing"
)

// TestParsePodUID: the kubelet's cgroup names under both drivers and both
// cgroup versions give the pod's UID; paths outside kubepods give none.
func TestParsePodUID(t *testing.T) {
	const uid = "3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b"
	for _, c := range []struct{ name, text, want string }{
		{"v2 cgroupfs burstable", "0::/kubepods/burstable/pod" + uid + "/0123abcd\n", uid},
		{"v2 cgroupfs guaranteed", "0::/kubepods/pod" + uid + "/0123abcd\n", uid},
		{"v2 systemd", "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/cri-containerd-0123abcd.scope\n", uid},
		{"v2 systemd guaranteed", "0::/kubepods.slice/kubepods-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/cri-containerd-0123abcd.scope\n", uid},
		{"v1 several hierarchies", "12:pids:/user.slice\n11:memory:/kubepods/besteffort/pod" + strings.ToUpper(uid) + "/abc\n", uid},
		{"no pod", "0::/user.slice/user-0.slice/session-1.scope\n", ""},
		{"pod-like name outside kubepods", "0::/system.slice/pod" + uid + "\n", ""},
		{"kubepods without a pod", "0::/kubepods/burstable\n", ""},
		{"garbage", "not a cgroup line\n", ""},
	} {
		if got := ParsePodUID(strings.NewReader(c.text)); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
