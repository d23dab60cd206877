package mux

// Done returns a channel closed once the channel has ended (Close, or
// the first error: Err is set) and its progress goroutines and transport
// are gone.
func (c *Channel) Done() <-chan struct{} { return c.closed }
