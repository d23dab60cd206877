package shm_test

import (
	"os"
	"testing"

	"github.com/sdpshim/sdpshim/core/coretest"
	"github.com/sdpshim/sdpshim/core/shm"
	"github.com/sdpshim/sdpshim/core/verbs"
)

var harness = coretest.Harness{
	Name: "shm",
	Open: func() (verbs.Provider, error) { return shm.Open() },
}

func TestMain(m *testing.M) {
	coretest.ServePeer(harness)
	os.Exit(m.Run())
}

func TestConformance(t *testing.T) { coretest.Run(t, harness) }
