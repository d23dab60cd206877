//go:build rdma && linux && cgo

package rdma

// #include "sdp_verbs.h"
import "C"

import (
	"encoding/binary"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// builtSend is one struct ibv_send_wr as sdp_build_send made it.
type builtSend struct {
	ID         uint64
	Next       int // index of the next request; -1 ends the chain
	SGE        int // index of sg_list in the SGE array; -1 for NULL
	NumSGE     int
	Opcode     int
	Flags      uint
	Imm        uint32 // imm_data converted back to host order
	RemoteAddr uint64
	RKey       uint32
	SGEs       []wireSGE
}

// buildSendChain runs the whole send path short of ibv_post_send: the
// translation of translate.go into C memory, then the C build of struct
// ibv_send_wr, and reads the result back. It needs no device; tests use it
// to check the C half where no RDMA device exists.
func buildSendChain(wr *verbs.SendRequest, lim limits, regions regionSet) ([]builtSend, *verbs.SendRequest, error) {
	n := 0
	for w := wr; w != nil; w = w.Next {
		n++
	}
	reqs, err := newCArray[wireSend](n)
	if err != nil {
		return nil, wr, err
	}
	defer reqs.free()
	sges, err := newCArray[wireSGE](n * lim.maxSGE)
	if err != nil {
		return nil, wr, err
	}
	defer sges.free()
	wrs, err := callocBytes(n, C.sizeof_struct_ibv_send_wr)
	if err != nil {
		return nil, wr, err
	}
	defer cfree(wrs)
	built := 0
	for w := wr; w != nil; w = w.Next {
		first := built * lim.maxSGE
		if _, err := translateSend(w, lim, regions, uint64(built), &reqs.s[built], sges.s[first:first+lim.maxSGE], uint32(first)); err != nil {
			return nil, w, err
		}
		built++
	}
	C.sdp_build_send(swrPtr(reqs), C.int(built), sgePtr(sges), sendWRPtr(wrs))
	out := make([]builtSend, built)
	for i := range out {
		v := C.sdp_view_send(sendWRPtr(wrs), sgePtr(sges), C.int(i))
		var imm [4]byte
		binary.NativeEndian.PutUint32(imm[:], uint32(v.imm_be))
		out[i] = builtSend{ID: uint64(v.wr_id), Next: int(v.next), SGE: int(v.sge), NumSGE: int(v.num_sge),
			Opcode: int(v.opcode), Flags: uint(v.send_flags), Imm: binary.BigEndian.Uint32(imm[:]),
			RemoteAddr: uint64(v.remote_addr), RKey: uint32(v.rkey)}
		if out[i].SGE >= 0 {
			out[i].SGEs = append([]wireSGE(nil), sges.s[out[i].SGE:out[i].SGE+out[i].NumSGE]...)
		}
	}
	return out, nil, nil
}
