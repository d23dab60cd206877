//go:build rdma && linux && cgo

package rdma_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sdpshim/sdpshim/core/rdma"
	"github.com/sdpshim/sdpshim/core/verbs"
)

// envChild makes the test binary run one child scenario (runChild)
// instead of the tests: used where libibverbs must start with a
// different environment.
const envChild = "SDPSHIM_RDMA_TEST_CHILD"

// runChild runs a scenario in this (child) process, prints the outcome
// on stdout and returns the exit status.
func runChild(name string) int {
	switch name {
	case "open":
		p, err := rdma.Open(rdma.Options{})
		if err == nil {
			p.Close()
			fmt.Println("opened")
			return 0
		}
		fmt.Printf("not-supported=%v\n%v\n", errors.Is(err, verbs.ErrNotSupported), err)
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown child scenario %q\n", name)
	return 2
}

// TestOpenWithoutDevice: on a machine with no RDMA device, Open fails
// with ErrNotSupported and says why.
func TestOpenWithoutDevice(t *testing.T) {
	p, err := rdma.Open(rdma.Options{})
	if err == nil {
		name, port := p.Device()
		p.Close()
		t.Skipf("this machine has an RDMA device (%s port %d)", name, port)
	}
	if !errors.Is(err, verbs.ErrNotSupported) || !strings.Contains(err.Error(), "no RDMA device") {
		t.Fatalf("Open: %v; want ErrNotSupported saying no RDMA device", err)
	}
	t.Logf("Open: %v", err)
}

func TestOpenBadOptions(t *testing.T) {
	if _, err := rdma.Open(rdma.Options{Port: 300}); !errors.Is(err, verbs.ErrInvalid) {
		t.Fatalf("Open with port 300: %v, want ErrInvalid", err)
	}
}

// TestOpenZeroDevices points libibverbs at an empty sysfs (SYSFS_PATH),
// in a child process, so ibv_get_device_list succeeds with zero devices
// (rather than failing as it does on a kernel without RDMA): Open must
// report that as ErrNotSupported too.
func TestOpenZeroDevices(t *testing.T) {
	if p, err := rdma.Open(rdma.Options{}); err == nil {
		p.Close()
		t.Skip("this machine has an RDMA device; the empty-sysfs child could still find it over netlink")
	}
	sys := t.TempDir()
	for _, d := range []string{"class/infiniband_verbs", "class/infiniband"} {
		if err := os.MkdirAll(filepath.Join(sys, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"=open", "SYSFS_PATH="+sys)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	got := string(out)
	if !strings.HasPrefix(got, "not-supported=true\n") || !strings.Contains(got, "no RDMA device") {
		t.Fatalf("Open with zero devices: %q; want ErrNotSupported saying no RDMA device", got)
	}
	if !strings.Contains(got, "libibverbs lists no device") && !strings.Contains(got, "ibv_get_device_list") {
		t.Errorf("Open with zero devices does not say why: %q", got)
	}
	t.Logf("child: %s", strings.TrimSpace(got))
}
