package shm_test

import (
	"os"
	"testing"

	"github.com/sdpshim/sdpshim/core"
	"github.com/sdpshim/sdpshim/core/coretest"
	"github.com/sdpshim/sdpshim/core/shm"
)

var harness = coretest.Harness{
	Name: "shm",
	Open: func() (core.Provider, error) { return shm.Open() },
}

func TestMain(m *testing.M) {
	coretest.ServePeer(harness)
	os.Exit(m.Run())
}

func TestConformance(t *testing.T) { coretest.Run(t, harness) }
