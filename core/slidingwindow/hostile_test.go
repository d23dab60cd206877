package slidingwindow

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/shm"
	"github.com/sdpshim/sdpshim/core/wire"
)

// hostileCase is one misbehaviour of a raw peer against a victim
// transport that first sends sends blocks to it.
type hostileCase struct {
	name     string
	sends    int
	harmless bool // the victim must stay up and receive a valid block 0 afterwards
	act      func(r *rawPeer) error
}

var hostileConfig = Config{Blocks: 4, BlockSize: 128} // MaxPayload 112

var hostileCases = []hostileCase{
	{name: "imm-skips-a-block", act: func(r *rawPeer) error {
		return r.writeImm(0, encodeImm(5, 10, false), r.block(0, 10))
	}},
	{name: "imm-length-over-max", act: func(r *rawPeer) error {
		return r.writeImm(0, encodeImm(0, 113, false), make([]byte, wire.HeaderSize+113))
	}},
	{name: "imm-length-not-written", act: func(r *rawPeer) error {
		return r.writeImm(0, encodeImm(0, 10, false), r.block(0, 20))
	}},
	{name: "header-length-not-imm", act: func(r *rawPeer) error {
		b := r.block(0, 10)
		wire.BlockHeader{Stream: 1, Len: 9, Flags: wire.FlagData}.Encode(b)
		return r.writeImm(0, encodeImm(0, 10, false), b)
	}},
	{name: "garbage-header", act: func(r *rawPeer) error {
		b := r.block(0, 10)
		pattern(b[:wire.HeaderSize], 9, 9)
		return r.writeImm(0, encodeImm(0, 10, false), b)
	}},
	{name: "overrun-unreleased-slot", act: func(r *rawPeer) error {
		for k := 0; k <= r.n; k++ {
			if err := r.writeBlock(k, 10, false); err != nil {
				return err
			}
		}
		return nil
	}},
	{name: "ack-beyond-head", act: func(r *rawPeer) error { return r.sendMsg(msgAck, 1) }},
	{name: "ack-not-advancing", sends: 1, act: func(r *rawPeer) error { return r.sendMsg(msgAck, 0) }},
	{name: "ack-backwards", sends: 2, act: func(r *rawPeer) error {
		if err := r.sendMsg(msgAck, 2); err != nil {
			return err
		}
		return r.sendMsg(msgAck, 1)
	}},
	{name: "message-kind-unknown", act: func(r *rawPeer) error { return r.send([]byte{9, 0, 0, 0, 0, 0, 0, 0}, 0, false) }},
	{name: "message-reserved-set", sends: 1, act: func(r *rawPeer) error {
		return r.send([]byte{msgAck, 1, 0, 0, 1, 0, 0, 0}, 0, false)
	}},
	{name: "message-short", sends: 1, act: func(r *rawPeer) error { return r.send([]byte{msgAck, 0, 0, 0}, 0, false) }},
	{name: "message-long", sends: 1, act: func(r *rawPeer) error { return r.send(make([]byte, 2*msgSize), 0, false) }},
	{name: "message-with-imm", sends: 1, act: func(r *rawPeer) error {
		return r.send([]byte{msgAck, 0, 0, 0, 1, 0, 0, 0}, 1, true)
	}},
	{name: "farewell-with-value", act: func(r *rawPeer) error { return r.sendMsg(msgClose, 7) }},
	{name: "plain-write-is-ignored", harmless: true, act: func(r *rawPeer) error {
		if err := r.write(0, make([]byte, 64)); err != nil {
			return err
		}
		return r.writeBlock(0, 10, true)
	}},
}

func init() {
	for _, c := range hostileCases {
		peerSides["hostile-"+c.name] = func(e *peerEnv) error {
			r, err := openRaw(e.p, e.fd, e.cfg, e.deadline)
			if err != nil {
				return err
			}
			defer r.close()
			if err := rawSide(r, c, e.deadline); err != nil {
				return err
			}
			return e.expect(1) // the victim has seen it: stay up until then
		}
	}
}

// rawSide waits for the victim's blocks, then misbehaves.
func rawSide(r *rawPeer, c hostileCase, deadline time.Time) error {
	if err := r.awaitArrivals(c.sends, deadline); err != nil {
		return err
	}
	return c.act(r)
}

// victimSide sends c.sends blocks, then receives until the transport ends
// and checks how.
func victimSide(tr *Transport, c hostileCase, deadline time.Time) error {
	for i := 0; i < c.sends; i++ {
		if ok, err := tr.TrySend(dataHeader(1, uint32(i)), []byte("bait")); !ok || err != nil {
			return fmt.Errorf("victim send %d: %v %v", i, ok, err)
		}
	}
	w := newWaiter()
	if c.harmless {
		b, err := receiveWait(w, tr, deadline)
		if err != nil || b.Seq != 0 || !intact(b) {
			return fmt.Errorf("after a harmless write: block %+v, %v", b.BlockHeader, err)
		}
		if _, ok, err := tr.Receive(); ok || err != nil {
			return fmt.Errorf("after a harmless write: %v %v", ok, err)
		}
		return nil
	}
	var err error
	for err == nil {
		_, err = receiveWait(w, tr, deadline) // blocks before the violation are taken and held
	}
	if !errors.Is(err, wire.ErrProtocol) {
		return fmt.Errorf("transport ended with %v, want ErrProtocol", err)
	}
	if _, ok, err2 := tr.Receive(); ok || !errors.Is(err2, wire.ErrProtocol) {
		return fmt.Errorf("Receive after the violation: %v %v", ok, err2)
	}
	if ok, err2 := tr.TrySend(dataHeader(1, 9), []byte("x")); ok || err2 == nil {
		return fmt.Errorf("TrySend after the violation: %v %v", ok, err2)
	}
	return nil
}

func TestHostilePeer(t *testing.T) {
	for _, c := range hostileCases {
		t.Run(c.name, func(t *testing.T) {
			victim, raw := rawPair(t, hostileConfig)
			errs := make(chan error, 1)
			go func() { errs <- rawSide(raw, c, deadline()) }()
			if err := victimSide(victim, c, deadline()); err != nil {
				t.Error(err)
			}
			if err := <-errs; err != nil {
				t.Errorf("raw peer: %v", err)
			}
		})
	}
}

func TestHostilePeerCrossProcess(t *testing.T) {
	for _, c := range hostileCases {
		t.Run(c.name, func(t *testing.T) {
			runPeer(t, "hostile-"+c.name, hostileConfig, 1, 0, func(e *peerEnv, _ *peerProc) error {
				tr, err := e.open()
				if err != nil {
					return err
				}
				defer tr.Close()
				err = victimSide(tr, c, e.deadline)
				if serr := e.send(1); err == nil && serr != nil {
					err = serr
				}
				return err
			})
		})
	}
}

// rawPair sets up a victim transport and a raw peer in this process.
func rawPair(t *testing.T, cfg Config) (*Transport, *rawPeer) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	pv, _ := shm.Open()
	pr, _ := shm.Open()
	var victim *Transport
	var raw *rawPeer
	var errV, errR error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		victim, errV = Open(pv, fds[0], cfg, deadline())
	}()
	raw, errR = openRaw(pr, fds[1], cfg, deadline())
	wg.Wait()
	t.Cleanup(func() {
		if victim != nil {
			victim.Close()
		}
		if raw != nil {
			raw.close()
		}
		for _, p := range []*shm.Provider{pv, pr} {
			if err := p.Close(); err != nil {
				t.Errorf("provider busy at the end: %v", err)
			}
		}
	})
	if errV != nil || errR != nil {
		t.Fatalf("setup: %v / %v", errV, errR)
	}
	return victim, raw
}
