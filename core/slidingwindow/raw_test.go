package slidingwindow

import (
	"fmt"
	"time"

	"github.com/sdpshim/sdpshim/core/setup"
	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wire"
)

// rawPeer speaks the setup exchange of a sliding-window transport and then
// posts whatever a case wants: the hostile peer of the hostile tests.
type rawPeer struct {
	link    *setup.Link
	ring    verbs.Region // what the victim writes its blocks into
	local   verbs.Region // sources and receive landing slots
	victim  verbs.RemoteRegion
	n, size int
	rings   int
	wr      verbs.SendRequest
	sge     [1]verbs.SGE
	buf     [16]verbs.Completion
	arrived int // writes with immediate taken from the receive queue
}

const rawLand = 1 << 16 // offset of the landing slots in local

// openRaw sets up the raw side over fd.
func openRaw(p verbs.Provider, fd int, cfg Config, deadline time.Time) (*rawPeer, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	r := &rawPeer{n: cfg.Blocks, size: cfg.BlockSize, rings: queueDepth(cfg.Blocks)}
	var err error
	if r.ring, err = p.RegisterRegion(r.n*r.size, verbs.AccessLocalWrite|verbs.AccessRemoteWrite); err != nil {
		return nil, err
	}
	if r.local, err = p.RegisterRegion(rawLand+r.rings*msgSize, verbs.AccessLocalWrite); err != nil {
		r.close()
		return nil, err
	}
	scfg := setup.SetupConfig{Transport: Name, Flow: cfg.Flow, Blocks: r.n, BlockSize: r.size, MaxRings: r.rings}
	var blob []byte
	if r.link, blob, err = setup.Establish(fd, p, scfg, encodeBlob(r.ring.Remote(), r.n, r.size), deadline); err != nil {
		r.close()
		return nil, err
	}
	if r.victim, err = decodeBlob(blob, r.n, r.size); err != nil {
		r.close()
		return nil, err
	}
	for i := 0; i < r.rings; i++ {
		rr := &verbs.RecvRequest{ID: uint64(i), SGEs: []verbs.SGE{{Key: r.local.LocalKey(), Offset: uint64(rawLand + i*msgSize), Length: msgSize}}}
		if _, err := r.link.Bell.PostRecv(rr); err != nil {
			r.close()
			return nil, err
		}
	}
	return r, nil
}

func (r *rawPeer) close() {
	if r.link != nil {
		r.link.Close()
	}
	for _, x := range []verbs.Region{r.ring, r.local} {
		if x != nil {
			x.Close()
		}
	}
}

// writeImm writes data to slot's start with a WRITE_WITH_IMM carrying imm.
func (r *rawPeer) writeImm(slot int, imm uint32, data []byte) error {
	copy(r.local.Bytes(), data)
	r.sge[0] = verbs.SGE{Key: r.local.LocalKey(), Length: uint32(len(data))}
	r.wr = verbs.SendRequest{Op: verbs.OpWriteWithImm, SGEs: r.sge[:], Imm: imm,
		RemoteAddr: r.victim.At(uint64(slot * r.size)), RemoteKey: r.victim.Key}
	return r.link.PostBell(&r.wr)
}

// write writes data to slot's start with a plain WRITE.
func (r *rawPeer) write(slot int, data []byte) error {
	copy(r.local.Bytes(), data)
	r.sge[0] = verbs.SGE{Key: r.local.LocalKey(), Length: uint32(len(data))}
	r.wr = verbs.SendRequest{Op: verbs.OpWrite, SGEs: r.sge[:],
		RemoteAddr: r.victim.At(uint64(slot * r.size)), RemoteKey: r.victim.Key}
	return r.link.PostData(&r.wr, true)
}

// block returns the wire form of a valid block k of n bytes.
func (r *rawPeer) block(k, n int) []byte {
	b := make([]byte, wire.HeaderSize+n)
	wire.BlockHeader{Stream: 1, Seq: uint32(k), Len: uint32(n), Flags: wire.FlagData}.Encode(b)
	pattern(b[wire.HeaderSize:], 1, uint32(k))
	return b
}

// writeBlock writes a valid block k of n bytes, as the transport would.
func (r *rawPeer) writeBlock(k, n int, full bool) error {
	return r.writeImm(k%r.n, encodeImm(uint64(k), n, full), r.block(k, n))
}

// send posts a SEND of msg (inline when it fits), with imm when hasImm.
func (r *rawPeer) send(msg []byte, imm uint32, hasImm bool) error {
	copy(r.local.Bytes(), msg)
	r.sge[0] = verbs.SGE{Key: r.local.LocalKey(), Length: uint32(len(msg))}
	r.wr = verbs.SendRequest{Op: verbs.OpSend, SGEs: r.sge[:], Imm: imm, HasImm: hasImm}
	if len(msg) <= r.link.MaxInline {
		r.wr.Flags = verbs.SendInline
	}
	return r.link.PostBell(&r.wr)
}

// sendMsg sends a well-formed message.
func (r *rawPeer) sendMsg(kind byte, value uint32) error {
	var m [msgSize]byte
	encodeMsg(m[:], kind, value)
	return r.send(m[:], 0, false)
}

// awaitArrivals waits until k of the victim's writes arrived (reposting
// receives as it takes them).
func (r *rawPeer) awaitArrivals(k int, deadline time.Time) error {
	for r.arrived < k {
		n, err := r.link.BellRecvCQ.Poll(r.buf[:])
		if err != nil {
			return err
		}
		for _, c := range r.buf[:n] {
			if c.Status != verbs.StatusSuccess {
				return fmt.Errorf("raw peer: receive completed %v", c.Status)
			}
			if c.Op == verbs.OpRecvWithImm {
				r.arrived++
			}
			rr := &verbs.RecvRequest{ID: c.ID, SGEs: []verbs.SGE{{Key: r.local.LocalKey(), Offset: uint64(rawLand + int(c.ID)*msgSize), Length: msgSize}}}
			if _, err := r.link.Bell.PostRecv(rr); err != nil {
				return err
			}
		}
		if n == 0 {
			if time.Now().After(deadline) {
				return fmt.Errorf("raw peer: %d of %d writes arrived by the deadline", r.arrived, k)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	return nil
}
