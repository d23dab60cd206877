//go:build rdma && linux && cgo

package rdma

// #cgo LDFLAGS: -libverbs -lrdmacm
// #include "sdp_verbs.h"
import "C"

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Compile-time checks that the Go mirrors of tables.go and translate.go
// match the C headers. Each line fails to compile (constant index out of
// range, or an array length that does not fit [0]) when they differ.

// enum ibv_wc_status.
var (
	_ = [1]struct{}{}[C.IBV_WC_SUCCESS-ibvWCSuccess]
	_ = [1]struct{}{}[C.IBV_WC_LOC_LEN_ERR-ibvWCLocLenErr]
	_ = [1]struct{}{}[C.IBV_WC_LOC_QP_OP_ERR-ibvWCLocQPOpErr]
	_ = [1]struct{}{}[C.IBV_WC_LOC_EEC_OP_ERR-ibvWCLocEECOpErr]
	_ = [1]struct{}{}[C.IBV_WC_LOC_PROT_ERR-ibvWCLocProtErr]
	_ = [1]struct{}{}[C.IBV_WC_WR_FLUSH_ERR-ibvWCWRFlushErr]
	_ = [1]struct{}{}[C.IBV_WC_MW_BIND_ERR-ibvWCMWBindErr]
	_ = [1]struct{}{}[C.IBV_WC_BAD_RESP_ERR-ibvWCBadRespErr]
	_ = [1]struct{}{}[C.IBV_WC_LOC_ACCESS_ERR-ibvWCLocAccessErr]
	_ = [1]struct{}{}[C.IBV_WC_REM_INV_REQ_ERR-ibvWCRemInvReqErr]
	_ = [1]struct{}{}[C.IBV_WC_REM_ACCESS_ERR-ibvWCRemAccessErr]
	_ = [1]struct{}{}[C.IBV_WC_REM_OP_ERR-ibvWCRemOpErr]
	_ = [1]struct{}{}[C.IBV_WC_RETRY_EXC_ERR-ibvWCRetryExcErr]
	_ = [1]struct{}{}[C.IBV_WC_RNR_RETRY_EXC_ERR-ibvWCRNRRetryExcErr]
	_ = [1]struct{}{}[C.IBV_WC_LOC_RDD_VIOL_ERR-ibvWCLocRDDViolErr]
	_ = [1]struct{}{}[C.IBV_WC_REM_INV_RD_REQ_ERR-ibvWCRemInvRdReqErr]
	_ = [1]struct{}{}[C.IBV_WC_REM_ABORT_ERR-ibvWCRemAbortErr]
	_ = [1]struct{}{}[C.IBV_WC_INV_EECN_ERR-ibvWCInvEECNErr]
	_ = [1]struct{}{}[C.IBV_WC_INV_EEC_STATE_ERR-ibvWCInvEECStateErr]
	_ = [1]struct{}{}[C.IBV_WC_FATAL_ERR-ibvWCFatalErr]
	_ = [1]struct{}{}[C.IBV_WC_RESP_TIMEOUT_ERR-ibvWCRespTimeoutErr]
	_ = [1]struct{}{}[C.IBV_WC_GENERAL_ERR-ibvWCGeneralErr]
	_ = [1]struct{}{}[C.IBV_WC_TM_ERR-ibvWCTMErr]
	_ = [1]struct{}{}[C.IBV_WC_TM_RNDV_INCOMPLETE-ibvWCTMRndvIncomplete]
)

// enum ibv_wc_opcode, ibv_wc_flags, ibv_wr_opcode, ibv_send_flags,
// ibv_access_flags, ibv_qp_state, ibv_mtu.
var (
	_ = [1]struct{}{}[C.IBV_WC_RECV-ibvWCRecv]
	_ = [1]struct{}{}[C.IBV_WC_RECV_RDMA_WITH_IMM-ibvWCRecvRDMAWithImm]
	_ = [1]struct{}{}[C.IBV_WC_WITH_IMM-ibvWCWithImm]
	_ = [1]struct{}{}[C.IBV_WR_RDMA_WRITE-ibvWRRDMAWrite]
	_ = [1]struct{}{}[C.IBV_WR_RDMA_WRITE_WITH_IMM-ibvWRRDMAWriteWithImm]
	_ = [1]struct{}{}[C.IBV_WR_SEND-ibvWRSend]
	_ = [1]struct{}{}[C.IBV_WR_SEND_WITH_IMM-ibvWRSendWithImm]
	_ = [1]struct{}{}[C.IBV_WR_RDMA_READ-ibvWRRDMARead]
	_ = [1]struct{}{}[C.IBV_SEND_FENCE-ibvSendFence]
	_ = [1]struct{}{}[C.IBV_SEND_SIGNALED-ibvSendSignaled]
	_ = [1]struct{}{}[C.IBV_SEND_INLINE-ibvSendInline]
	_ = [1]struct{}{}[C.IBV_ACCESS_LOCAL_WRITE-ibvAccessLocalWrite]
	_ = [1]struct{}{}[C.IBV_ACCESS_REMOTE_WRITE-ibvAccessRemoteWrite]
	_ = [1]struct{}{}[C.IBV_ACCESS_REMOTE_READ-ibvAccessRemoteRead]
	_ = [1]struct{}{}[C.IBV_QPS_RESET-ibvQPSReset]
	_ = [1]struct{}{}[C.IBV_QPS_INIT-ibvQPSInit]
	_ = [1]struct{}{}[C.IBV_QPS_RTR-ibvQPSRTR]
	_ = [1]struct{}{}[C.IBV_QPS_RTS-ibvQPSRTS]
	_ = [1]struct{}{}[C.IBV_QPS_SQD-ibvQPSSQD]
	_ = [1]struct{}{}[C.IBV_QPS_SQE-ibvQPSSQE]
	_ = [1]struct{}{}[C.IBV_QPS_ERR-ibvQPSErr]
	_ = [1]struct{}{}[C.IBV_QPS_UNKNOWN-ibvQPSUnknown]
	_ = [1]struct{}{}[C.IBV_MTU_256-ibvMTUMin]
	_ = [1]struct{}{}[C.IBV_MTU_4096-ibvMTUMax]
)

// Layouts: the Go wire structs are the C structs byte for byte.
var (
	_ [0]struct{} = [unsafe.Sizeof(wireSGE{}) - C.sizeof_struct_ibv_sge]struct{}{}
	_ [0]struct{} = [C.sizeof_struct_ibv_sge - unsafe.Sizeof(wireSGE{})]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(wireSGE{}.Length) - unsafe.Offsetof(C.struct_ibv_sge{}.length)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(wireSGE{}.LKey) - unsafe.Offsetof(C.struct_ibv_sge{}.lkey)]struct{}{}

	_ [0]struct{} = [unsafe.Sizeof(wireSend{}) - C.sizeof_struct_sdp_swr]struct{}{}
	_ [0]struct{} = [C.sizeof_struct_sdp_swr - unsafe.Sizeof(wireSend{})]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(wireSend{}.RemoteAddr) - unsafe.Offsetof(C.struct_sdp_swr{}.remote_addr)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(wireSend{}.RKey) - unsafe.Offsetof(C.struct_sdp_swr{}.rkey)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(wireSend{}.Imm) - unsafe.Offsetof(C.struct_sdp_swr{}.imm)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(wireSend{}.SGE) - unsafe.Offsetof(C.struct_sdp_swr{}.sge)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(wireSend{}.NumSGE) - unsafe.Offsetof(C.struct_sdp_swr{}.num_sge)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(wireSend{}.Opcode) - unsafe.Offsetof(C.struct_sdp_swr{}.opcode)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(wireSend{}.Flags) - unsafe.Offsetof(C.struct_sdp_swr{}.flags)]struct{}{}

	_ [0]struct{} = [unsafe.Sizeof(wireRecv{}) - C.sizeof_struct_sdp_rwr]struct{}{}
	_ [0]struct{} = [C.sizeof_struct_sdp_rwr - unsafe.Sizeof(wireRecv{})]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(wireRecv{}.SGE) - unsafe.Offsetof(C.struct_sdp_rwr{}.sge)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(wireRecv{}.NumSGE) - unsafe.Offsetof(C.struct_sdp_rwr{}.num_sge)]struct{}{}

	_ [0]struct{} = [unsafe.Sizeof(wireCompletion{}) - C.sizeof_struct_sdp_wc]struct{}{}
	_ [0]struct{} = [C.sizeof_struct_sdp_wc - unsafe.Sizeof(wireCompletion{})]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(wireCompletion{}.Status) - unsafe.Offsetof(C.struct_sdp_wc{}.status)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(wireCompletion{}.Opcode) - unsafe.Offsetof(C.struct_sdp_wc{}.opcode)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(wireCompletion{}.ByteLen) - unsafe.Offsetof(C.struct_sdp_wc{}.byte_len)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(wireCompletion{}.Imm) - unsafe.Offsetof(C.struct_sdp_wc{}.imm)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(wireCompletion{}.QPNum) - unsafe.Offsetof(C.struct_sdp_wc{}.qp_num)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(wireCompletion{}.Flags) - unsafe.Offsetof(C.struct_sdp_wc{}.flags)]struct{}{}
)

// errnoOf turns an errno returned by a verbs call into an error.
func errnoOf(rc C.int) error {
	if rc < 0 {
		rc = -rc
	}
	return unix.Errno(rc)
}
