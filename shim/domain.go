package shim

import (
	"github.com/sirupsen/logrus"

	"github.com/sdpshim/sdpshim/core/mux"
	"github.com/sdpshim/sdpshim/core/shm"
)

// Protection domains. A verbs.Provider is one protection domain: the peer
// of every queue pair of a provider can reach each of its regions that
// grants remote access (the shm provider even hands that peer the
// region's memfd). Channels go to different processes, possibly of
// different users, so each channel opens a provider of its own and the
// regions of one channel are never exposed to the peer of another. An
// shm provider holds no operating-system resources beside its objects,
// which the channel's transport closes; the provider itself is closed
// once the channel has ended.

// channelProvider opens the provider (protection domain) of one channel.
func channelProvider() (*shm.Provider, error) { return shm.Open() }

// closeProviderWhenDone closes pr once ch has ended and its transport
// has released the objects created from pr.
func (p *Process) closeProviderWhenDone(ch *mux.Channel, pr *shm.Provider) {
	<-ch.Done()
	if err := pr.Close(); err != nil && p.log.IsLevelEnabled(logrus.DebugLevel) {
		p.log.WithError(err).Debug("channel provider not released")
	}
}
