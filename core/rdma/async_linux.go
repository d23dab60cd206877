//go:build rdma && linux && cgo

package rdma

// #include "sdp_verbs.h"
import "C"

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// asyncEvents reads a device's asynchronous events (ibv_get_async_event)
// on a goroutine, acknowledging each at once (destroying a queue pair or
// completion queue waits for its events to be acknowledged). A completion
// queue overrun (IBV_EVENT_CQ_ERR) marks the queue, which Poll then
// reports as ErrCQOverrun; queue pair errors need no action here: the
// device moves the queue pair to the error state, which State reads.
type asyncEvents struct {
	p    *Provider
	fd   int // the context's async_fd, made non-blocking
	wake int // eventfd that stops the goroutine
	done chan struct{}
}

func startAsyncEvents(p *Provider) (*asyncEvents, error) {
	fd := int(p.ctx.async_fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, fmt.Errorf("rdma: %s: async event fd non-blocking: %w", p.name, err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("rdma: %s: eventfd: %w", p.name, err)
	}
	a := &asyncEvents{p: p, fd: fd, wake: wake, done: make(chan struct{})}
	go a.run()
	return a, nil
}

func (a *asyncEvents) run() {
	defer close(a.done)
	fds := []unix.PollFd{{Fd: int32(a.fd), Events: unix.POLLIN}, {Fd: int32(a.wake), Events: unix.POLLIN}}
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 && fds[0].Revents&unix.POLLIN == 0 {
			return
		}
		for {
			ev := C.sdp_get_async(a.p.ctx)
			if ev.err != 0 {
				break
			}
			a.handle(ev)
		}
	}
}

func (a *asyncEvents) handle(ev C.struct_sdp_async) {
	if ev._type != C.IBV_EVENT_CQ_ERR {
		return
	}
	a.p.mu.Lock()
	cq := a.p.cqs[ev.cq]
	a.p.mu.Unlock()
	if cq != nil {
		cq.markOverrun()
	}
}

// stop ends the goroutine and waits for it.
func (a *asyncEvents) stop() {
	ringEventfd(a.wake)
	<-a.done
	unix.Close(a.wake)
}

// ringEventfd adds one to an eventfd (non-blocking; a saturated counter
// is readable already).
func ringEventfd(fd int) {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	for {
		if _, err := unix.Write(fd, one[:]); err != unix.EINTR {
			return
		}
	}
}

// drainEventfd resets an eventfd to zero (non-blocking).
func drainEventfd(fd int) {
	var buf [8]byte
	for {
		if _, err := unix.Read(fd, buf[:]); err != unix.EINTR {
			return
		}
	}
}
