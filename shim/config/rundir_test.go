package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDefaultRunDir(t *testing.T) {
	long := "/" + strings.Repeat("x", 80)
	for _, tc := range []struct {
		uid     int
		environ []string
		want    string
	}{
		{0, nil, "/run/sdpshim"},
		{0, []string{"XDG_RUNTIME_DIR=/run/user/0"}, "/run/sdpshim"},
		{1000, []string{"XDG_RUNTIME_DIR=/run/user/1000"}, "/run/user/1000/sdpshim"},
		{1000, []string{"XDG_RUNTIME_DIR=/run/user/1000/"}, "/run/user/1000/sdpshim"},
		{1000, []string{"XDG_RUNTIME_DIR=relative"}, "/tmp/sdpshim-1000"},
		{1000, []string{"XDG_RUNTIME_DIR=" + long}, "/tmp/sdpshim-1000"},
		{1000, []string{"XDG_RUNTIME_DIR="}, "/tmp/sdpshim-1000"},
		{1000, nil, "/tmp/sdpshim-1000"},
		{1000, []string{"XDG_RUNTIME_DIR=/run/user/1000", "SDPSHIM_RUNDIR=/srv/s"}, "/srv/s"},
	} {
		c, err := load(tc.environ, tc.uid)
		if err != nil || c.RunDir != tc.want {
			t.Errorf("uid %d %q: RunDir %q (%v), want %q", tc.uid, tc.environ, c.RunDir, err, tc.want)
		}
	}
}

func TestEnsureRunDir(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "a", "sdpshim")
	if err := EnsureRunDir(dir); err != nil {
		t.Fatalf("creating: %v", err)
	}
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v (%v), want 0700", info.Mode(), err)
	}
	if err := EnsureRunDir(dir); err != nil {
		t.Errorf("existing: %v", err)
	}

	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := EnsureRunDir(open); err == nil || !strings.Contains(err.Error(), "writable") {
		t.Errorf("world-writable: %v", err)
	}

	link := filepath.Join(base, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if err := EnsureRunDir(link); err == nil {
		t.Error("a symlink was accepted")
	}

	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := EnsureRunDir(file); err == nil {
		t.Error("a plain file was accepted")
	}

	if os.Geteuid() == 0 {
		foreign := filepath.Join(base, "foreign")
		if err := os.Mkdir(foreign, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(foreign, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if err := EnsureRunDir(foreign); err == nil || !strings.Contains(err.Error(), "owned") {
			t.Errorf("foreign owner: %v", err)
		}
	}
}
