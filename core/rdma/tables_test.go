package rdma

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/verbs"
)

func TestStatusTableHasNoGaps(t *testing.T) {
	for i, e := range statusTable {
		if e.name == "" {
			t.Errorf("ibv_wc_status %d has no entry: it would read as %v", i, e.status)
		}
	}
	if len(statusTable) != ibvWCTMRndvIncomplete+1 {
		t.Errorf("status table has %d entries, want %d", len(statusTable), ibvWCTMRndvIncomplete+1)
	}
}

func TestStatusOf(t *testing.T) {
	for _, c := range []struct {
		wc   uint32
		want verbs.Status
	}{
		{ibvWCSuccess, verbs.StatusSuccess},
		{ibvWCLocLenErr, verbs.StatusLocalLength},
		{ibvWCLocProtErr, verbs.StatusLocalProtection},
		{ibvWCLocAccessErr, verbs.StatusLocalProtection},
		{ibvWCRemAccessErr, verbs.StatusRemoteAccess},
		{ibvWCRemInvReqErr, verbs.StatusRemoteInvalid},
		{ibvWCRemOpErr, verbs.StatusRemoteInvalid},
		{ibvWCWRFlushErr, verbs.StatusFlushed},
		{ibvWCRetryExcErr, verbs.StatusRetryExceeded},
		{ibvWCRNRRetryExcErr, verbs.StatusRetryExceeded},
		{ibvWCRespTimeoutErr, verbs.StatusRetryExceeded},
		{ibvWCGeneralErr, verbs.StatusLocalProtection},
		{ibvWCTMRndvIncomplete + 1, statusUnknown},
		{1 << 31, statusUnknown},
	} {
		if got := statusOf(c.wc); got != c.want {
			t.Errorf("statusOf(%d) = %v, want %v", c.wc, got, c.want)
		}
	}
	for wc := uint32(1); wc < 64; wc++ {
		if statusOf(wc) == verbs.StatusSuccess {
			t.Errorf("ibv_wc_status %d maps to success", wc)
		}
	}
}

func TestRecvOpOf(t *testing.T) {
	for _, c := range []struct {
		wc   uint32
		want verbs.Opcode
		ok   bool
	}{
		{ibvWCRecv, verbs.OpRecv, true},
		{ibvWCRecvRDMAWithImm, verbs.OpRecvWithImm, true},
		{0, 0, false}, // IBV_WC_SEND
		{1, 0, false}, // IBV_WC_RDMA_WRITE
		{ibvWCRecv + 2, 0, false},
	} {
		got, ok := recvOpOf(c.wc)
		if got != c.want || ok != c.ok {
			t.Errorf("recvOpOf(%d) = %v, %v; want %v, %v", c.wc, got, ok, c.want, c.ok)
		}
	}
}

func TestWROpcodeOf(t *testing.T) {
	for _, c := range []struct {
		op     verbs.Opcode
		hasImm bool
		want   uint8
		ok     bool
	}{
		{verbs.OpWrite, false, ibvWRRDMAWrite, true},
		{verbs.OpWrite, true, ibvWRRDMAWrite, true}, // HasImm only matters for SEND
		{verbs.OpWriteWithImm, false, ibvWRRDMAWriteWithImm, true},
		{verbs.OpRead, false, ibvWRRDMARead, true},
		{verbs.OpSend, false, ibvWRSend, true},
		{verbs.OpSend, true, ibvWRSendWithImm, true},
		{0, false, 0, false},
		{verbs.OpRecv, false, 0, false},
		{verbs.OpRecvWithImm, false, 0, false},
		{200, false, 0, false},
	} {
		got, ok := wrOpcodeOf(c.op, c.hasImm)
		if got != c.want || ok != c.ok {
			t.Errorf("wrOpcodeOf(%v, %v) = %d, %v; want %d, %v", c.op, c.hasImm, got, ok, c.want, c.ok)
		}
	}
}

func TestSendFlagsAndAccess(t *testing.T) {
	if got := sendFlagsOf(verbs.SendSignaled | verbs.SendInline | verbs.SendFence); got != ibvSendSignaled|ibvSendInline|ibvSendFence {
		t.Errorf("all send flags = %#x", got)
	}
	if got := sendFlagsOf(0); got != 0 {
		t.Errorf("no send flags = %#x", got)
	}
	for _, c := range []struct {
		a    verbs.Access
		want int
	}{
		{0, 0},
		{verbs.AccessLocalWrite, ibvAccessLocalWrite},
		{verbs.AccessRemoteRead, ibvAccessRemoteRead},
		{verbs.AccessRemoteWrite, ibvAccessRemoteWrite | ibvAccessLocalWrite},
		{verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead, ibvAccessLocalWrite | ibvAccessRemoteWrite | ibvAccessRemoteRead},
	} {
		if got := accessOf(c.a); got != c.want {
			t.Errorf("accessOf(%#x) = %#x, want %#x", c.a, got, c.want)
		}
	}
}

func TestQPStateOf(t *testing.T) {
	want := map[int]verbs.QPState{
		ibvQPSReset: verbs.QPInit, ibvQPSInit: verbs.QPInit, ibvQPSRTR: verbs.QPInit,
		ibvQPSRTS: verbs.QPReady, ibvQPSSQD: verbs.QPReady,
		ibvQPSSQE: verbs.QPError, ibvQPSErr: verbs.QPError, ibvQPSUnknown: verbs.QPError, 99: verbs.QPError,
	}
	for s, w := range want {
		if got := qpStateOf(s); got != w {
			t.Errorf("qpStateOf(%d) = %v, want %v", s, got, w)
		}
	}
}

func TestMTUBytes(t *testing.T) {
	for m, want := range map[uint8]int{0: 0, 1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096, 6: 0} {
		if got := mtuBytes(m); got != want {
			t.Errorf("mtuBytes(%d) = %d, want %d", m, got, want)
		}
	}
}

func TestPostErrorOf(t *testing.T) {
	if err := postErrorOf(unix.ENOMEM); !errors.Is(err, verbs.ErrQueueFull) {
		t.Errorf("ENOMEM -> %v, want ErrQueueFull", err)
	}
	if err := postErrorOf(unix.EINVAL); !errors.Is(err, verbs.ErrInvalid) {
		t.Errorf("EINVAL -> %v, want ErrInvalid", err)
	}
	if err := postErrorOf(unix.EIO); !errors.Is(err, unix.EIO) || errors.Is(err, verbs.ErrInvalid) {
		t.Errorf("EIO -> %v", err)
	}
}
