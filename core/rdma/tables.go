package rdma

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// Every translation between a libibverbs enum and its core counterpart
// lives in this file, as a table. The ibv* constants mirror
// <infiniband/verbs.h>; verbs.go checks at compile time, in the rdma
// build, that each one equals the header's value, so the tables can be
// tested without cgo and cannot drift from the library.

// enum ibv_wc_status.
const (
	ibvWCSuccess          = 0
	ibvWCLocLenErr        = 1
	ibvWCLocQPOpErr       = 2
	ibvWCLocEECOpErr      = 3
	ibvWCLocProtErr       = 4
	ibvWCWRFlushErr       = 5
	ibvWCMWBindErr        = 6
	ibvWCBadRespErr       = 7
	ibvWCLocAccessErr     = 8
	ibvWCRemInvReqErr     = 9
	ibvWCRemAccessErr     = 10
	ibvWCRemOpErr         = 11
	ibvWCRetryExcErr      = 12
	ibvWCRNRRetryExcErr   = 13
	ibvWCLocRDDViolErr    = 14
	ibvWCRemInvRdReqErr   = 15
	ibvWCRemAbortErr      = 16
	ibvWCInvEECNErr       = 17
	ibvWCInvEECStateErr   = 18
	ibvWCFatalErr         = 19
	ibvWCRespTimeoutErr   = 20
	ibvWCGeneralErr       = 21
	ibvWCTMErr            = 22
	ibvWCTMRndvIncomplete = 23
)

// statusTable maps enum ibv_wc_status to verbs.Status, indexed by the
// verbs value. Statuses core has no name for are grouped by who failed:
// the local device (StatusLocalProtection), the peer or the transport
// between (StatusRemoteInvalid), or the peer being unreachable
// (StatusRetryExceeded). A value past the table (a newer library) becomes
// statusUnknown: never success. Every entry has a name, so a gap cannot
// silently read as success (tables_test.go checks).
var statusTable = [...]struct {
	name   string
	status verbs.Status
}{
	ibvWCSuccess:          {"IBV_WC_SUCCESS", verbs.StatusSuccess},
	ibvWCLocLenErr:        {"IBV_WC_LOC_LEN_ERR", verbs.StatusLocalLength},
	ibvWCLocQPOpErr:       {"IBV_WC_LOC_QP_OP_ERR", verbs.StatusLocalProtection},
	ibvWCLocEECOpErr:      {"IBV_WC_LOC_EEC_OP_ERR", verbs.StatusLocalProtection},
	ibvWCLocProtErr:       {"IBV_WC_LOC_PROT_ERR", verbs.StatusLocalProtection},
	ibvWCWRFlushErr:       {"IBV_WC_WR_FLUSH_ERR", verbs.StatusFlushed},
	ibvWCMWBindErr:        {"IBV_WC_MW_BIND_ERR", verbs.StatusLocalProtection},
	ibvWCBadRespErr:       {"IBV_WC_BAD_RESP_ERR", verbs.StatusRemoteInvalid},
	ibvWCLocAccessErr:     {"IBV_WC_LOC_ACCESS_ERR", verbs.StatusLocalProtection},
	ibvWCRemInvReqErr:     {"IBV_WC_REM_INV_REQ_ERR", verbs.StatusRemoteInvalid},
	ibvWCRemAccessErr:     {"IBV_WC_REM_ACCESS_ERR", verbs.StatusRemoteAccess},
	ibvWCRemOpErr:         {"IBV_WC_REM_OP_ERR", verbs.StatusRemoteInvalid},
	ibvWCRetryExcErr:      {"IBV_WC_RETRY_EXC_ERR", verbs.StatusRetryExceeded},
	ibvWCRNRRetryExcErr:   {"IBV_WC_RNR_RETRY_EXC_ERR", verbs.StatusRetryExceeded},
	ibvWCLocRDDViolErr:    {"IBV_WC_LOC_RDD_VIOL_ERR", verbs.StatusLocalProtection},
	ibvWCRemInvRdReqErr:   {"IBV_WC_REM_INV_RD_REQ_ERR", verbs.StatusRemoteInvalid},
	ibvWCRemAbortErr:      {"IBV_WC_REM_ABORT_ERR", verbs.StatusRetryExceeded},
	ibvWCInvEECNErr:       {"IBV_WC_INV_EECN_ERR", verbs.StatusRemoteInvalid},
	ibvWCInvEECStateErr:   {"IBV_WC_INV_EEC_STATE_ERR", verbs.StatusRemoteInvalid},
	ibvWCFatalErr:         {"IBV_WC_FATAL_ERR", verbs.StatusLocalProtection},
	ibvWCRespTimeoutErr:   {"IBV_WC_RESP_TIMEOUT_ERR", verbs.StatusRetryExceeded},
	ibvWCGeneralErr:       {"IBV_WC_GENERAL_ERR", verbs.StatusLocalProtection},
	ibvWCTMErr:            {"IBV_WC_TM_ERR", verbs.StatusLocalProtection},
	ibvWCTMRndvIncomplete: {"IBV_WC_TM_RNDV_INCOMPLETE", verbs.StatusLocalProtection},
}

const statusUnknown = verbs.StatusLocalProtection

// statusOf maps a completion's ibv_wc_status.
func statusOf(wc uint32) verbs.Status {
	if wc < uint32(len(statusTable)) {
		return statusTable[wc].status
	}
	return statusUnknown
}

// enum ibv_wc_opcode (the receive side; send completions take their
// opcode from the request, see ring.go) and enum ibv_wc_flags.
const (
	ibvWCRecv            = 1 << 7
	ibvWCRecvRDMAWithImm = ibvWCRecv + 1
	ibvWCWithImm         = 1 << 1
)

// recvOpOf maps the opcode of a successful receive completion; false for
// an opcode a receive queue of an RC queue pair does not produce.
func recvOpOf(wc uint32) (verbs.Opcode, bool) {
	switch wc {
	case ibvWCRecv:
		return verbs.OpRecv, true
	case ibvWCRecvRDMAWithImm:
		return verbs.OpRecvWithImm, true
	}
	return 0, false
}

// enum ibv_wr_opcode.
const (
	ibvWRRDMAWrite        = 0
	ibvWRRDMAWriteWithImm = 1
	ibvWRSend             = 2
	ibvWRSendWithImm      = 3
	ibvWRRDMARead         = 4
)

// wrOpcodeOf maps a send request's opcode (and HasImm, for SEND) to enum
// ibv_wr_opcode; false for an opcode a send queue does not take.
func wrOpcodeOf(op verbs.Opcode, hasImm bool) (uint8, bool) {
	switch op {
	case verbs.OpWrite:
		return ibvWRRDMAWrite, true
	case verbs.OpWriteWithImm:
		return ibvWRRDMAWriteWithImm, true
	case verbs.OpRead:
		return ibvWRRDMARead, true
	case verbs.OpSend:
		if hasImm {
			return ibvWRSendWithImm, true
		}
		return ibvWRSend, true
	}
	return 0, false
}

// enum ibv_send_flags.
const (
	ibvSendFence    = 1 << 0
	ibvSendSignaled = 1 << 1
	ibvSendInline   = 1 << 3
)

var sendFlagTable = [...]struct {
	core verbs.SendFlags
	ibv  uint8
}{
	{verbs.SendSignaled, ibvSendSignaled},
	{verbs.SendInline, ibvSendInline},
	{verbs.SendFence, ibvSendFence},
}

func sendFlagsOf(f verbs.SendFlags) uint8 {
	var out uint8
	for _, e := range sendFlagTable {
		if f&e.core != 0 {
			out |= e.ibv
		}
	}
	return out
}

// enum ibv_access_flags.
const (
	ibvAccessLocalWrite  = 1 << 0
	ibvAccessRemoteWrite = 1 << 1
	ibvAccessRemoteRead  = 1 << 2
)

// accessOf maps region rights to ibv_reg_mr access flags. Verbs refuses
// REMOTE_WRITE without LOCAL_WRITE, so a region the peer may write is also
// locally writable by the device.
func accessOf(a verbs.Access) int {
	var out int
	if a&verbs.AccessLocalWrite != 0 {
		out |= ibvAccessLocalWrite
	}
	if a&verbs.AccessRemoteWrite != 0 {
		out |= ibvAccessRemoteWrite | ibvAccessLocalWrite
	}
	if a&verbs.AccessRemoteRead != 0 {
		out |= ibvAccessRemoteRead
	}
	return out
}

// enum ibv_qp_state.
const (
	ibvQPSReset   = 0
	ibvQPSInit    = 1
	ibvQPSRTR     = 2
	ibvQPSRTS     = 3
	ibvQPSSQD     = 4
	ibvQPSSQE     = 5
	ibvQPSErr     = 6
	ibvQPSUnknown = 7
)

// qpStateTable maps ibv_query_qp's state. RTR is still "not connected"
// for the contract (sends are refused); SQD and SQE are transient.
var qpStateTable = map[int]verbs.QPState{
	ibvQPSReset:   verbs.QPInit,
	ibvQPSInit:    verbs.QPInit,
	ibvQPSRTR:     verbs.QPInit,
	ibvQPSRTS:     verbs.QPReady,
	ibvQPSSQD:     verbs.QPReady,
	ibvQPSSQE:     verbs.QPError,
	ibvQPSErr:     verbs.QPError,
	ibvQPSUnknown: verbs.QPError,
}

func qpStateOf(s int) verbs.QPState {
	if st, ok := qpStateTable[s]; ok {
		return st
	}
	return verbs.QPError
}

// enum ibv_mtu: IBV_MTU_256 (1) to IBV_MTU_4096 (5).
const (
	ibvMTUMin = 1
	ibvMTUMax = 5
)

// mtuBytes returns the path MTU an ibv_mtu value stands for; 0 if none.
func mtuBytes(m uint8) int {
	if m < ibvMTUMin || m > ibvMTUMax {
		return 0
	}
	return 128 << m
}

// postErrorOf maps the errno ibv_post_send/ibv_post_recv return (and
// other verbs calls that return or set one) to the contract's errors.
func postErrorOf(errno unix.Errno) error {
	switch errno {
	case unix.ENOMEM:
		return fmt.Errorf("%v: %w", errno, verbs.ErrQueueFull)
	case unix.EINVAL:
		return fmt.Errorf("%v: %w", errno, verbs.ErrInvalid)
	}
	return errno
}
