package coretest

import (
	"fmt"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// RegionsStayInTheirDomain: a region belongs to the protection domain (the
// Provider) it was registered in. Side A plays a process with two
// channels: channel 1 on its own Provider, channel 2 on a second Provider
// of the same device. Side B is connected to both, so it is the peer of
// channel 1 and also the stranger on channel 2 (a stronger position than
// a third process: it legitimately holds channel 1's key). Through
// channel 2 it names channel 1's region by its remote key, once with a
// WRITE and once with a READ on a queue pair of its own each: both
// complete with StatusRemoteAccess, the READ returns none of the region's
// bytes and the WRITE changes none, and channel 1 keeps working. Channel 2's
// own region stays reachable through channel 2 before that, so the
// refusal is about the domain, not a broken queue pair.

const domainSize = 4096

// domainPattern seeds the two regions' contents.
func domainPattern(channel int) uint64 { return uint64(0xd0a1<<8 | channel) }

func domainsA(s *side) {
	p2 := s.extraProvider()
	s.connect(verbs.QPConfig{})       // channel 1
	s.connectOn(p2, verbs.QPConfig{}) // channel 2: the stranger's WRITE
	s.connectOn(p2, verbs.QPConfig{}) // channel 2: the stranger's READ
	// A local region first, so that on providers that number keys from
	// one per domain the secret's key is one channel 2 does not have.
	s.region(domainSize, verbs.AccessLocalWrite)
	secret := s.region(domainSize, accessAll)
	fill(secret.Bytes(), domainPattern(1))
	other := s.regionOn(p2, domainSize, accessAll)
	fill(other.Bytes(), domainPattern(2))
	s.sendRegion(secret)
	s.sendRegion(other)
	s.await("probed")
	if i := mismatch(secret.Bytes(), domainPattern(1)); i >= 0 {
		s.fatalf("channel 1's region changed at byte %d after a WRITE through channel 2 (another protection domain)", i)
	}
	if i := mismatch(other.Bytes(), domainPattern(2)); i >= 0 {
		s.fatalf("channel 2's region changed at byte %d; nothing wrote to it", i)
	}
}

func domainsB(s *side) {
	c1 := s.connect(verbs.QPConfig{})
	w2 := s.connect(verbs.QPConfig{})
	r2 := s.connect(verbs.QPConfig{})
	secret := s.recvRegion()
	other := s.recvRegion()
	buf := s.region(domainSize, accessAll)

	// Channel 2 works for its own region.
	domainRead(s, r2, buf, other, 1, verbs.StatusSuccess)
	if i := mismatch(buf.Bytes(), domainPattern(2)); i >= 0 {
		s.fatalf("READ of channel 2's region through channel 2 differs at byte %d", i)
	}
	if secret.Key == other.Key {
		// Keys are per domain: this provider gave both the same number,
		// so channel 2's key names its own region there. Guess another.
		s.logf("both domains use key %#x; probing with key %#x", secret.Key, secret.Key+1)
		secret.Key++
	}

	// The stranger names channel 1's region through channel 2.
	fill(buf.Bytes(), domainPattern(3))
	s.postSend(w2, &verbs.SendRequest{ID: 2, Op: verbs.OpWrite, Flags: verbs.SendSignaled,
		SGEs: []verbs.SGE{sge(buf, 0, domainSize)}, RemoteAddr: secret.At(0), RemoteKey: secret.Key})
	s.one(w2.scq, 2, verbs.OpWrite, verbs.StatusRemoteAccess)
	fill(buf.Bytes(), domainPattern(4))
	domainRead(s, r2, buf, secret, 3, verbs.StatusRemoteAccess)
	if i := mismatch(buf.Bytes(), domainPattern(4)); i >= 0 {
		s.fatalf("a READ that failed with %v changed the destination at byte %d", verbs.StatusRemoteAccess, i)
	}

	// Channel 1 is untouched: its peer still reads the region.
	if st := c1.qp.State(); st != verbs.QPReady {
		s.fatalf("channel 1's queue pair is %v after another channel's access errors, want %v", st, verbs.QPReady)
	}
	domainRead(s, c1, buf, secret, 4, verbs.StatusSuccess)
	if i := mismatch(buf.Bytes(), domainPattern(1)); i >= 0 {
		s.fatalf("READ of channel 1's region through channel 1 differs at byte %d", i)
	}
	s.step("probed")
}

// domainRead READs all of remote into buf through c and expects st.
func domainRead(s *side, c *conn, buf verbs.Region, remote verbs.RemoteRegion, id uint64, st verbs.Status) {
	s.postSend(c, &verbs.SendRequest{ID: id, Op: verbs.OpRead, Flags: verbs.SendSignaled,
		SGEs: []verbs.SGE{sge(buf, 0, domainSize)}, RemoteAddr: remote.At(0), RemoteKey: remote.Key})
	s.one(c.scq, id, verbs.OpRead, st)
}

// extraProvider opens a second Provider (another protection domain) that
// the side closes at the end of the case, after the objects created from
// it.
func (s *side) extraProvider() verbs.Provider {
	if s.open == nil {
		s.fatalf("side %s cannot open a second provider", s.role)
	}
	p, err := s.open()
	s.must(err, "open a second provider")
	s.own(fmt.Sprintf("second provider (%s)", p.Name()), p)
	return p
}
