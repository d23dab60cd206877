package main

/*
#include "sdpshim_core.h"
#include <errno.h>

extern int sdp_core_pid;
*/
import "C"

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/shim"
)

// The entry points of preload/c/sdpshim_core.h. Each converts the C
// arguments and calls the process's shim.Process; see that header for
// every contract. sdpshim_core_fork_child is in fork.c.

// proc is the shim of this process, set by init.
var proc *shim.Process

func main() {}

//export sdpshim_core_init
func sdpshim_core_init(host *C.struct_sdpshim_host, envp **C.char) C.int {
	if host == nil || host.abi != C.SDPSHIM_CORE_ABI {
		return C.int(shim.ReasonShimOff)
	}
	spareP()
	p, reason := shim.Init(cHost{host}, goEnviron(envp))
	if p == nil {
		return C.int(reason)
	}
	proc = p
	C.sdp_core_pid = C.int(unix.Getpid())
	return 0
}

//export sdpshim_core_socket
func sdpshim_core_socket(fd, domain, typ, protocol C.int) C.int {
	return C.int(proc.SocketCreated(int(fd), int(domain), int(typ)))
}

//export sdpshim_core_bind
func sdpshim_core_bind(fd C.int, addr *C.struct_sockaddr, n C.socklen_t) C.int {
	return C.SDPSHIM_PASS
}

//export sdpshim_core_listen
func sdpshim_core_listen(fd, backlog C.int) C.int {
	return C.int(proc.Listen(int(fd), int(backlog)))
}

//export sdpshim_core_accept
func sdpshim_core_accept(lfd, fd C.int, peer *C.struct_sockaddr, n C.socklen_t, flags C.int) C.int {
	ap, _, _ := shim.ParseSockaddr(bytesAt(unsafe.Pointer(peer), C.size_t(n)))
	return C.int(proc.Accept(int(lfd), int(fd), ap, int(flags)))
}

//export sdpshim_core_connect
func sdpshim_core_connect(fd C.int, addr *C.struct_sockaddr, n C.socklen_t, w *C.struct_sdpshim_wait) C.int {
	if addr == nil || n == 0 {
		return C.SDPSHIM_PASS
	}
	return C.int(proc.Connect(int(fd), bytesAt(unsafe.Pointer(addr), C.size_t(n))))
}

//export sdpshim_core_recv
func sdpshim_core_recv(fd C.int, buf unsafe.Pointer, n C.size_t, flags C.int, w *C.struct_sdpshim_wait) C.ssize_t {
	var gw shim.Wait
	if flags&unix.MSG_TRUNC != 0 { // the buffer is not the call's (NULL skips bytes)
		return C.ssize_t(waitResult(proc.RecvDiscard(int(fd), clampLen(n), int(flags), &gw), &gw, w))
	}
	if buf == nil && n > 0 {
		return -C.EFAULT
	}
	return C.ssize_t(waitResult(proc.Recv(int(fd), bytesAt(buf, n), int(flags), &gw), &gw, w))
}

//export sdpshim_core_send
func sdpshim_core_send(fd C.int, buf unsafe.Pointer, n C.size_t, flags C.int, w *C.struct_sdpshim_wait) C.ssize_t {
	if buf == nil && n > 0 {
		return -C.EFAULT
	}
	var gw shim.Wait
	return C.ssize_t(waitResult(proc.Send(int(fd), bytesAt(buf, n), int(flags), &gw), &gw, w))
}

//export sdpshim_core_recvmsg
func sdpshim_core_recvmsg(fd C.int, msg *C.struct_msghdr, flags C.int, w *C.struct_sdpshim_wait) C.ssize_t {
	var gw shim.Wait
	var r int64
	if flags&unix.MSG_TRUNC != 0 { // the iovecs' memory is not the call's
		n, ok := iovLen(msg)
		if !ok {
			return -C.EFAULT
		}
		r = waitResult(proc.RecvDiscard(int(fd), n, int(flags), &gw), &gw, w)
	} else {
		var store [8][]byte
		bufs, ok := iovecs(msg, store[:0])
		if !ok {
			return -C.EFAULT
		}
		r = waitResult(proc.RecvMsg(int(fd), bufs, int(flags), &gw), &gw, w)
	}
	if r >= 0 {
		msg.msg_flags, msg.msg_controllen, msg.msg_namelen = 0, 0, 0
	}
	return C.ssize_t(r)
}

//export sdpshim_core_sendmsg
func sdpshim_core_sendmsg(fd C.int, msg *C.struct_msghdr, flags C.int, w *C.struct_sdpshim_wait) C.ssize_t {
	var store [8][]byte
	bufs, ok := iovecs(msg, store[:0])
	if !ok {
		return -C.EFAULT
	}
	var gw shim.Wait
	return C.ssize_t(waitResult(proc.SendMsg(int(fd), bufs, int(flags), &gw), &gw, w))
}

//export sdpshim_core_sendfile
func sdpshim_core_sendfile(out, in C.int, off *C.off_t, n C.size_t, w *C.struct_sdpshim_wait) C.ssize_t {
	var gw shim.Wait
	return C.ssize_t(waitResult(proc.SendFile(int(out), int(in), (*int64)(unsafe.Pointer(off)), clampLen(n), &gw), &gw, w))
}

//export sdpshim_core_splice
func sdpshim_core_splice(in C.int, offIn *C.loff_t, out C.int, offOut *C.loff_t, n C.size_t, flags C.uint, w *C.struct_sdpshim_wait) C.ssize_t {
	var gw shim.Wait
	r := proc.Splice(int(in), (*int64)(unsafe.Pointer(offIn)), int(out), (*int64)(unsafe.Pointer(offOut)), clampLen(n), &gw)
	return C.ssize_t(waitResult(r, &gw, w))
}

//export sdpshim_core_shutdown
func sdpshim_core_shutdown(fd, how C.int) C.int { return C.int(proc.Shutdown(int(fd), int(how))) }

//export sdpshim_core_close
func sdpshim_core_close(fd C.int) { proc.Close(int(fd)) }

//export sdpshim_core_dup
func sdpshim_core_dup(oldfd, newfd C.int) C.int { return C.int(proc.Dup(int(oldfd), int(newfd))) }

//export sdpshim_core_evict
func sdpshim_core_evict(fd C.int) C.int { return C.int(proc.Evict(int(fd))) }

//export sdpshim_core_nonblock
func sdpshim_core_nonblock(fd, on C.int) { proc.Nonblock(int(fd), on != 0) }

//export sdpshim_core_ioctl
func sdpshim_core_ioctl(fd C.int, req C.ulong, arg unsafe.Pointer) C.int {
	v, r := proc.Ioctl(int(fd), uint(req))
	if r == 0 {
		if arg == nil {
			return -C.EFAULT
		}
		*(*C.int)(arg) = C.int(v)
	}
	return C.int(r)
}

//export sdpshim_core_getsockopt
func sdpshim_core_getsockopt(fd, level, name C.int, val unsafe.Pointer, n *C.socklen_t) C.int {
	v, r := proc.Getsockopt(int(fd), int(level), int(name))
	if r == 0 {
		if val == nil || n == nil || *n < C.socklen_t(unsafe.Sizeof(C.int(0))) {
			return -C.EINVAL
		}
		*(*C.int)(val) = C.int(v)
		*n = C.socklen_t(unsafe.Sizeof(C.int(0)))
	}
	return C.int(r)
}

//export sdpshim_core_setsockopt
func sdpshim_core_setsockopt(fd, level, name C.int, val unsafe.Pointer, n C.socklen_t) C.int {
	return C.int(proc.Setsockopt(int(fd), int(level), int(name), bytesAt(val, C.size_t(n))))
}

//export sdpshim_core_poll
func sdpshim_core_poll(fds *C.struct_pollfd, n C.nfds_t, wait *C.struct_pollfd, wcap C.nfds_t, nwait *C.nfds_t, timeout C.int64_t) C.int {
	ready, k := proc.Poll(pollfds(fds, n), pollfds(wait, wcap), time.Duration(timeout))
	*nwait = C.nfds_t(k)
	return C.int(ready)
}

//export sdpshim_core_epoll_ctl
func sdpshim_core_epoll_ctl(epfd, op, fd C.int, ev *C.struct_epoll_event) C.int {
	var events uint32
	var data uint64
	if ev != nil {
		e := (*unix.EpollEvent)(unsafe.Pointer(ev))
		events, data = e.Events, uint64(uint32(e.Fd))|uint64(uint32(e.Pad))<<32
	} else if op != unix.EPOLL_CTL_DEL {
		return -C.EFAULT
	}
	return C.int(proc.EpollCtl(int(epfd), int(op), int(fd), events, data))
}

//export sdpshim_core_epoll_wait
func sdpshim_core_epoll_wait(epfd C.int, ev *C.struct_epoll_event, max, nkernel C.int, timeout C.int64_t) C.int {
	if ev == nil || max <= 0 {
		return -C.EINVAL
	}
	evs := unsafe.Slice((*unix.EpollEvent)(unsafe.Pointer(ev)), int(max))
	return C.int(proc.EpollWait(int(epfd), evs, int(nkernel), time.Duration(timeout)))
}

//export sdpshim_core_claim
func sdpshim_core_claim(fd C.int) C.int { return C.int(proc.Claim(int(fd))) }

//export sdpshim_core_accept_nofd
func sdpshim_core_accept_nofd() C.int { return C.int(proc.AcceptNoFD()) }

//export sdpshim_core_pass
func sdpshim_core_pass(fd C.int) { proc.Pass(int(fd)) }

//export sdpshim_core_fork_prepare
func sdpshim_core_fork_prepare(kind C.int) { proc.ForkPrepare(int(kind)) }

//export sdpshimExit
func sdpshimExit() {
	if proc != nil {
		proc.Exit()
	}
}
