package mux

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/core/wire"
)

// progress runs a channel's progress goroutines. While some goroutine
// waits on the channel (a sleeper on a localBell), held data waits for an
// asynchronous flush, or a closed stream waits for the peer's final block
// (its end must be seen without the application), they sleep on the
// transport's doorbells, pump arrivals and run the scheduler, and wake the
// local waiters through their stream events. With nobody waiting they
// park on a Go channel and cost nothing. The space doorbell is armed only
// while a writer waits or data waits for an asynchronous flush.
type progress struct {
	c        *Channel
	sleepers atomic.Int32  // armed localBells
	writers  atomic.Int32  // armed localBells of writers
	linger   atomic.Int32  // closed streams waiting for the peer's final block
	async    atomic.Bool   // the scheduler left data that flushes without the app
	spaceOn  atomic.Bool   // the combined sleeper armed the space doorbell
	pair     wire.BellPair // nil: two goroutines
	rxKick   chan struct{}
	txKick   chan struct{}
	wg       sync.WaitGroup
}

func (p *progress) start(c *Channel) {
	p.c = c
	p.rxKick, p.txKick = make(chan struct{}, 1), make(chan struct{}, 1)
	step := func() bool { return c.pump()+c.flush() > 0 }
	if bp, ok := c.t.(wire.BellPair); ok {
		p.pair = bp
		p.wg.Add(1)
		go p.run(p.rxKick, p.wanted, func() wait.Doorbell {
			// Published before reading what is wanted: a writer that
			// arrives meanwhile sees false and interrupts the sleep.
			p.spaceOn.Store(false)
			space := p.spaceWanted()
			p.spaceOn.Store(space)
			return bp.Bells(true, space)
		}, step)
		return
	}
	p.wg.Add(2)
	rx, tx := c.t.DataBell(), c.t.SpaceBell()
	go p.run(p.rxKick, p.wanted, func() wait.Doorbell { return rx }, func() bool { return c.pump() > 0 })
	go p.run(p.txKick, p.spaceWanted, func() wait.Doorbell { return tx }, func() bool { return c.flush() > 0 })
}

// kick tells the goroutines that there may be work; writer also wakes
// the one that waits for space (or makes the combined one re-arm with the
// space doorbell).
func (p *progress) kick(writer bool) {
	if writer && p.pair != nil && !p.spaceOn.Load() {
		p.pair.Interrupt()
	}
	kicks := []chan struct{}{p.rxKick, p.txKick}
	if !writer {
		kicks = kicks[:1]
	}
	for _, k := range kicks {
		select {
		case k <- struct{}{}:
		default:
		}
	}
}

func (p *progress) wait() { p.wg.Wait() }

func (p *progress) wanted() bool {
	return p.sleepers.Load() > 0 || p.async.Load() || p.linger.Load() > 0
}

func (p *progress) spaceWanted() bool { return p.writers.Load() > 0 || p.async.Load() }

// await parks until want reports work; false once the channel ended.
func (p *progress) await(kick chan struct{}, want func() bool) bool {
	for !want() {
		select {
		case <-kick:
		case <-p.c.failedCh:
			return false
		}
	}
	return !p.c.dead.Load()
}

// run is one progress goroutine: step makes progress (true when it did),
// bell returns the doorbell to sleep on when it could not.
func (p *progress) run(kick chan struct{}, want func() bool, bell func() wait.Doorbell, step func() bool) {
	defer p.wg.Done()
	for p.await(kick, want) {
		if step() {
			continue
		}
		b := bell()
		if err := b.Arm(); err != nil {
			p.end(err)
			return
		}
		if step() {
			b.Disarm()
			continue
		}
		err := b.Sleep(time.Time{})
		step()
		p.c.wakeAttended() // outside waiters (stream_attend.go) may wait for space
		if err != nil {
			p.end(err)
			return
		}
	}
}

// end handles a doorbell error: what arrived is taken first.
func (p *progress) end(err error) { p.c.drainAndFail(err) }
