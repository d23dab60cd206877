package waiting

import (
	"math/rand/v2"
	"time"
)

// Shape is a traffic pattern the client drives: request i is sent after
// Pause(i, ...) from the previous reply (or the start), and the run ends
// after its duration.
type Shape struct {
	Name string
	Note string // one line for the table's legend
	// Interval paces requests: each is sent Interval after the previous
	// send (steady) or the previous reply (within a train); 0 sends the
	// next request as soon as the reply is in.
	Interval time.Duration
	// On and Off make tides: requests flow for On, then none for Off.
	On, Off time.Duration
	// Train, when positive, groups requests into trains of Train requests;
	// between two trains the client is silent for a time drawn uniformly
	// from [GapMin, GapMax].
	Train          int
	GapMin, GapMax time.Duration
}

// Shapes are the four traffic shapes of issue 7.
var Shapes = []Shape{
	{Name: "steady-high", Note: "back-to-back request/response"},
	{Name: "steady-low", Note: "1000 requests/s, evenly paced", Interval: time.Millisecond},
	{Name: "tidal", Note: "back-to-back for 10 ms, then idle for 90 ms", On: 10 * time.Millisecond, Off: 90 * time.Millisecond},
	{Name: "intermittent", Note: "trains of 8 requests 50 us apart, then 2-10 ms silent",
		Interval: 50 * time.Microsecond, Train: 8, GapMin: 2 * time.Millisecond, GapMax: 10 * time.Millisecond},
}

// ShapeByName returns the shape called name.
func ShapeByName(name string) (Shape, bool) {
	for _, s := range Shapes {
		if s.Name == name {
			return s, true
		}
	}
	return Shape{}, false
}

// pacer decides when the client sends: next returns the time to send the
// request that follows, given the start of the run, the send time of the
// previous request and the time its reply came in.
type pacer struct {
	s     Shape
	rng   *rand.Rand
	sent  int // requests sent in the current train
	start time.Time
}

func newPacer(s Shape, start time.Time, seed uint64) *pacer {
	return &pacer{s: s, rng: rand.New(rand.NewPCG(seed, 0x7a17)), start: start}
}

// next returns when to send the next request (at or before replied:
// at once).
func (p *pacer) next(lastSend, replied time.Time) time.Time {
	s := p.s
	switch {
	case s.Train > 0:
		p.sent++
		if p.sent < s.Train {
			return replied.Add(s.Interval)
		}
		p.sent = 0
		gap := s.GapMin
		if s.GapMax > s.GapMin {
			gap += time.Duration(p.rng.Int64N(int64(s.GapMax - s.GapMin)))
		}
		return replied.Add(gap)
	case s.On > 0:
		cycle := s.On + s.Off
		in := replied.Sub(p.start) % cycle
		if in < s.On {
			return replied
		}
		return replied.Add(cycle - in)
	case s.Interval > 0:
		at := lastSend.Add(s.Interval)
		if at.Before(replied) { // fell behind: no catching up in a burst
			return replied
		}
		return at
	}
	return replied
}
