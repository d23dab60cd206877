//go:build rdma && linux && cgo

package rdma_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/sdpshim/sdpshim/core/coretest"
	"github.com/sdpshim/sdpshim/core/rdma"
	"github.com/sdpshim/sdpshim/core/verbs"
)

// The suite picks its device from the environment, so it can run on any
// host that has one: SDPSHIM_RDMA_DEVICE (verbs name, default the first
// with an active port), SDPSHIM_RDMA_PORT, SDPSHIM_RDMA_GID_INDEX.
var harness = coretest.Harness{
	Name: "rdma",
	Open: func() (verbs.Provider, error) {
		opts, err := optionsFromEnv()
		if err != nil {
			return nil, err
		}
		p, err := rdma.Open(opts)
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return p, nil
	},
}

func optionsFromEnv() (rdma.Options, error) {
	opts := rdma.Options{Device: os.Getenv("SDPSHIM_RDMA_DEVICE")}
	for name, dst := range map[string]*int{"SDPSHIM_RDMA_PORT": &opts.Port, "SDPSHIM_RDMA_GID_INDEX": &opts.GIDIndex} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return opts, err
			}
			*dst = n
		}
	}
	return opts, nil
}

func TestMain(m *testing.M) {
	coretest.ServePeer(harness)
	if name := os.Getenv(envChild); name != "" {
		os.Exit(runChild(name))
	}
	os.Exit(m.Run())
}

func TestConformance(t *testing.T) { coretest.Run(t, harness) }
