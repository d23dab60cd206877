package config

import (
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
		c, err := load(tc.environ, tc.uid, testSendBuf)
		if err != nil || c.RunDir != tc.want {
			t.Errorf("uid %d %q: RunDir %q (%v), want %q", tc.uid, tc.environ, c.RunDir, err, tc.want)
		}
	}
}
