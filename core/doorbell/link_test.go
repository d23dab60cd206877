package doorbell_test

import (
	"testing"

	"github.com/sdpshim/sdpshim/core/setup"
	"github.com/sdpshim/sdpshim/core/setup/setuptest"
	"github.com/sdpshim/sdpshim/core/shm"
	"github.com/sdpshim/sdpshim/core/verbs"
)

// The doorbell tests run over a real Link between two shm providers.

type linkSide = setuptest.Side

func testSetupConfig() setup.SetupConfig { return setuptest.Config() }

func openShm() (verbs.Provider, error) { return shm.Open() }

func establishPair(t *testing.T, ca, cb setup.SetupConfig) (a, b *linkSide, errA, errB error) {
	t.Helper()
	return setuptest.Pair(t, openShm, ca, cb)
}
