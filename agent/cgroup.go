package agent

import (
	"bufio"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// podDir matches the cgroup directory of a Kubernetes pod as the kubelet
// names it: "pod<uid>" under kubepods (the cgroupfs driver) or
// "kubepods[-<qos>]-pod<uid with underscores>.slice" (the systemd
// driver).
var podDir = regexp.MustCompile(`^(?:pod|kubepods(?:-[a-z]+)?-pod)([0-9a-fA-F]{8}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{12})(?:\.slice)?$`)

// PodUID returns the UID of the Kubernetes pod whose cgroup holds
// process pid (as this process's pid namespace numbers it), or "" when
// its cgroup names no pod (not in a pod, or pid not visible).
func PodUID(pid int) string {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return ""
	}
	defer f.Close()
	return ParsePodUID(f)
}

// ParsePodUID returns the pod UID named by a /proc/PID/cgroup text (one
// "id:controllers:path" line per hierarchy, cgroup v1 or v2): the first
// path under a kubepods directory with a pod directory in it, the UID in
// its canonical form (dashes, lower case); "" when none has one.
func ParsePodUID(r io.Reader) string {
	s := bufio.NewScanner(r)
	for s.Scan() {
		parts := strings.SplitN(s.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		underKubepods := false
		for _, dir := range strings.Split(parts[2], "/") {
			if dir == "kubepods" || strings.HasPrefix(dir, "kubepods.") || strings.HasPrefix(dir, "kubepods-") && strings.HasSuffix(dir, ".slice") && !podDir.MatchString(dir) {
				underKubepods = true
				continue
			}
			if m := podDir.FindStringSubmatch(dir); underKubepods && m != nil {
				return strings.ToLower(strings.ReplaceAll(m[1], "_", "-"))
			}
		}
	}
	return ""
}
