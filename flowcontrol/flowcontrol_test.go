package flowcontrol_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/sdpshim/sdpshim/flowcontrol"
)

func TestNewRejectsBadParams(t *testing.T) {
	good := flowcontrol.Params{Credits: 4, VirtualWindow: 128, ReceiveCapacity: 1024, BlockPayload: 128}
	for _, c := range []struct {
		name, param string
		edit        func(*flowcontrol.Params)
	}{
		{"credit", "BlockPayload", func(p *flowcontrol.Params) { p.BlockPayload = 0 }},
		{"packed", "ReceiveCapacity", func(p *flowcontrol.Params) { p.ReceiveCapacity = 64 }},
		{"nicassist", "ReceiveCapacity", func(p *flowcontrol.Params) { p.ReceiveCapacity = -1 }},
		{"credit", "Credits", func(p *flowcontrol.Params) { p.Credits = 0 }},
		{"credit", "Credits", func(p *flowcontrol.Params) { p.Credits = 9 }},
		{"nicassist", "VirtualWindow", func(p *flowcontrol.Params) { p.VirtualWindow = 0 }},
		{"nicassist", "VirtualWindow", func(p *flowcontrol.Params) { p.VirtualWindow = 1025 }},
	} {
		p := good
		c.edit(&p)
		_, err := flowcontrol.New(c.name, p)
		var pe *flowcontrol.ParamError
		if !errors.As(err, &pe) || pe.Param != c.param || pe.Algorithm != c.name {
			t.Errorf("New(%q, %+v) = %v, want a ParamError on %s", c.name, p, err, c.param)
		}
	}
	// Fields an algorithm does not use are not checked.
	if _, err := flowcontrol.New("packed", flowcontrol.Params{ReceiveCapacity: 64, BlockPayload: 64}); err != nil {
		t.Errorf("packed without credits or window: %v", err)
	}
	if _, err := flowcontrol.New("window", good); !errors.Is(err, flowcontrol.ErrUnknownAlgorithm) {
		t.Errorf("unknown name: %v", err)
	}
}

// TestStatsWhileRunning takes snapshots from another goroutine while the
// link runs (the race detector checks the counters are atomics).
func TestStatsWhileRunning(t *testing.T) {
	for _, name := range flowcontrol.Names() {
		l := newLink(t, name, linkCases[3].p, linkCases[3].slots)
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				var total flowcontrol.Stats
				total.Add(l.snd.(flowcontrol.StatsSource).Stats())
				total.Add(l.rcv.(flowcontrol.StatsSource).Stats())
				if total.Utilisation() > 1 {
					t.Errorf("%s: utilisation %v > 1", name, total.Utilisation())
				}
				select {
				case <-done:
					return
				default:
				}
			}
		})
		for range 200 {
			l.write(100)
			l.drain()
		}
		close(done)
		wg.Wait()
	}
}

// TestSignature: the name compared at setup carries exactly the
// parameters an algorithm uses, and fits the setup exchange.
func TestSignature(t *testing.T) {
	p := flowcontrol.Params{Credits: 4096, VirtualWindow: 1 << 30, ReceiveCapacity: 1 << 30, BlockPayload: 1 << 20}
	for name, want := range map[string]string{
		flowcontrol.NameCredit:    "credit/k=4096",
		flowcontrol.NamePacked:    "packed",
		flowcontrol.NameNICAssist: "nicassist/w=1073741824",
	} {
		got := flowcontrol.Signature(name, p)
		if got != want || len(got) > 32 || strings.ContainsAny(got, " \t") {
			t.Errorf("Signature(%q) = %q, want %q (at most 32 bytes, no spaces)", name, got, want)
		}
	}
	q := p
	q.Credits, q.VirtualWindow = 8, 64
	if flowcontrol.Signature(flowcontrol.NamePacked, q) != flowcontrol.Signature(flowcontrol.NamePacked, p) {
		t.Error("packed's signature depends on fields it does not use")
	}
	for _, name := range []string{flowcontrol.NameCredit, flowcontrol.NameNICAssist} {
		if flowcontrol.Signature(name, q) == flowcontrol.Signature(name, p) {
			t.Errorf("%s: different parameters, same signature", name)
		}
	}
}
