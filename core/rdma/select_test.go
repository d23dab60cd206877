package rdma

import (
	"errors"
	"strings"
	"testing"

	"github.com/sdpshim/sdpshim/core/verbs"
)

func TestChooseDeviceNone(t *testing.T) {
	_, _, err := chooseDevice(nil, Options{})
	if !errors.Is(err, verbs.ErrNotSupported) || !strings.Contains(err.Error(), "no RDMA device") {
		t.Fatalf("zero devices: %v, want ErrNotSupported saying no RDMA device", err)
	}
}

func TestChooseDevice(t *testing.T) {
	down := portFacts{num: 1, state: "down"}
	up := func(n int) portFacts { return portFacts{num: n, active: true, state: "active"} }
	devs := []deviceFacts{
		{name: "mlx5_0", ports: []portFacts{down}},
		{name: "mlx5_1", err: errors.New("ibv_open_device: permission denied")},
		{name: "mlx5_2", ports: []portFacts{down, up(2)}},
		{name: "rxe0", ports: []portFacts{up(1)}},
	}
	for _, c := range []struct {
		opts       Options
		dev, port  int
		errContain string
	}{
		{Options{}, 2, 2, ""},
		{Options{Device: "rxe0"}, 3, 1, ""},
		{Options{Port: 1}, 3, 1, ""},
		{Options{Device: "mlx5_2", Port: 2}, 2, 2, ""},
		{Options{Device: "mlx5_0"}, -1, 0, "mlx5_0 port 1 down"},
		{Options{Device: "mlx5_1"}, -1, 0, "permission denied"},
		{Options{Device: "mlx5_2", Port: 3}, -1, 0, "has no port 3"},
		{Options{Device: "nope"}, -1, 0, `no RDMA device named "nope" (found mlx5_0, mlx5_1, mlx5_2, rxe0)`},
	} {
		dev, port, err := chooseDevice(devs, c.opts)
		if c.errContain == "" {
			if err != nil || dev != c.dev || port != c.port {
				t.Errorf("%+v: (%d, %d, %v), want (%d, %d)", c.opts, dev, port, err, c.dev, c.port)
			}
			continue
		}
		if !errors.Is(err, verbs.ErrNotSupported) || !strings.Contains(err.Error(), c.errContain) {
			t.Errorf("%+v: %v, want ErrNotSupported containing %q", c.opts, err, c.errContain)
		}
	}
}

func TestOptionsNormalized(t *testing.T) {
	o, err := Options{}.normalized()
	if err != nil || o.RetryTimeout != defaultRetryTimeout || o.MinRNRTimer != defaultMinRNRTimer {
		t.Errorf("defaults: %+v %v", o, err)
	}
	for _, bad := range []Options{{Port: -1}, {Port: 256}, {GIDIndex: -1}, {RetryTimeout: 32}, {MinRNRTimer: 32}, {RetryTimeout: -1}} {
		if _, err := bad.normalized(); !errors.Is(err, verbs.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
}
