package verbs

import "errors"

// This file declares the provider ("NIC") interface that every transport in
// sdpshim is written against. Its semantics are those of libibverbs for a
// reliable-connected (RC) queue pair, reduced to what sdpshim uses, so that
// an rdma-core provider implements it one to one. Each method names the
// verbs call it corresponds to.
//
// Addresses: a work request names local memory as (local key, offset) inside
// a Region, and remote memory as (remote key, remote address), where the
// remote address is computed by the peer from the RemoteRegion the owner
// advertised: RemoteRegion.Addr + offset. The shm provider uses Addr = 0;
// an rdma provider uses the registered virtual address.

// Provider is one device opened with one protection domain
// (ibv_open_device + ibv_alloc_pd). Regions, completion queues and queue
// pairs created from it may be used together; objects of different
// providers may not be mixed. A Provider is safe for concurrent use.
//
// The protection domain is the unit of isolation: the peer of any queue
// pair of a Provider can reach every region of that Provider that grants
// remote access (given its key), and no region of another Provider, even
// with a guessed key (StatusRemoteAccess). Peers that must not reach each
// other's memory (channels to different processes) get a Provider each.
type Provider interface {
	// Name returns the provider's short name ("shm", "rdma").
	Name() string

	// RegisterRegion allocates size bytes of zeroed memory and registers it
	// with the given access rights (mmap + ibv_reg_mr). A region registered
	// with RemoteRead or RemoteWrite is reachable, once RegisterRegion
	// returns, by one-sided operations from the peer of every queue pair of
	// this provider that is or later becomes connected. size must be > 0
	// and at most MaxRegionSize; otherwise the error wraps ErrInvalid.
	// Bytes() of the region has exactly size bytes; the mapping behind it
	// starts on a page boundary and ends on one, so the aligned-word
	// helpers of sharedmem_unsafe.go may be used on any of its bytes.
	RegisterRegion(size int, access Access) (Region, error)

	// CreateCQ creates a completion queue holding at least depth
	// completions (ibv_create_comp_channel + ibv_create_cq; real queues
	// round the depth up). Completions beyond its capacity are an overrun: the queue reports ErrCQOverrun from Poll and the
	// queue pairs using it move to QPError.
	CreateCQ(depth int) (CompletionQueue, error)

	// CreateQP creates a reliable-connected queue pair in state QPInit
	// (ibv_create_qp + ibv_modify_qp to INIT). It is connected with
	// QueuePair.Connect.
	CreateQP(cfg QPConfig) (QueuePair, error)

	// Close releases the provider. Objects created from it must be closed
	// first; Close of a provider with live objects returns ErrBusy and
	// releases nothing (ibv_dealloc_pd + ibv_close_device).
	Close() error
}

// Access is the set of rights a region grants (enum ibv_access_flags).
type Access uint8

const (
	// AccessLocalWrite lets local work requests (RECV, READ) write into
	// the region (IBV_ACCESS_LOCAL_WRITE).
	AccessLocalWrite Access = 1 << iota
	// AccessRemoteWrite lets the peer WRITE into it (IBV_ACCESS_REMOTE_WRITE).
	AccessRemoteWrite
	// AccessRemoteRead lets the peer READ from it (IBV_ACCESS_REMOTE_READ).
	AccessRemoteRead
)

// MaxRegionSize bounds one region (1 GiB).
const MaxRegionSize = 1 << 30

// Region is registered memory (struct ibv_mr).
type Region interface {
	// Bytes returns the local mapping. It stays valid until Close; writes
	// by the peer through one-sided operations become visible in it as
	// described on Opcode.
	Bytes() []byte
	// LocalKey returns the key local work requests use to name this region
	// (ibv_mr.lkey).
	LocalKey() uint32
	// Remote returns what the peer needs to address this region with
	// one-sided operations (ibv_mr.rkey and ibv_mr.addr). Its Key is zero
	// when the region grants no remote access.
	Remote() RemoteRegion
	// Close deregisters and unmaps the region (ibv_dereg_mr). Later work
	// requests naming it complete with StatusLocalProtection (local key) or
	// StatusRemoteAccess (remote key at the peer).
	Close() error
}

// RemoteRegion is what a region's owner advertises to its peer.
type RemoteRegion struct {
	Key  uint32 // rkey
	Addr uint64 // address of byte 0 in the peer's address space for remote work requests
	Len  uint64 // length in bytes
}

// At returns the remote address of byte offset off of the region.
func (r RemoteRegion) At(off uint64) uint64 { return r.Addr + off }

// QPConfig configures a queue pair (struct ibv_qp_init_attr).
type QPConfig struct {
	SendCQ    CompletionQueue // completions of SEND, WRITE, WRITE_WITH_IMM, READ
	RecvCQ    CompletionQueue // completions of RECV (may equal SendCQ)
	MaxSend   int             // outstanding send-queue work requests (max_send_wr)
	MaxRecv   int             // outstanding posted receives (max_recv_wr)
	MaxInline int             // largest inline payload in bytes (max_inline_data)
	MaxSGE    int             // scatter/gather entries per request (max_send_sge, max_recv_sge); 0 means 1
}

// QPState is the state of a queue pair (enum ibv_qp_state, reduced).
type QPState uint8

const (
	QPInit  QPState = iota // created, not connected: RECV may be posted, sends are refused
	QPReady                // connected (RTS): all operations allowed
	QPError                // failed or peer gone: outstanding and new requests complete with StatusFlushed
	QPClosed
)

func (s QPState) String() string {
	switch s {
	case QPInit:
		return "init"
	case QPReady:
		return "ready"
	case QPError:
		return "error"
	case QPClosed:
		return "closed"
	}
	return "unknown"
}

// Endpoint describes a queue pair to its peer: what ibv_modify_qp to RTR
// needs (QP number, GID/LID, PSN, MTU), plus for providers that need them
// file descriptors, which travel with SCM_RIGHTS (see SendEndpoint). The
// contents are opaque outside the provider that made them.
type Endpoint struct {
	Data  []byte
	Files []int
}

// QueuePair is a reliable-connected queue pair (struct ibv_qp). Work
// requests posted to one queue pair execute in order: a request's effects at
// the peer are visible no earlier than those of every request posted before
// it on the same queue pair (RC ordering). PostSend and PostRecv are safe
// for concurrent use, but callers that need a specific interleaving must
// serialise their posts.
type QueuePair interface {
	// Number returns the queue pair number (ibv_qp.qp_num).
	Number() uint32
	// State returns the current state (ibv_query_qp).
	State() QPState

	// LocalEndpoint returns the description the peer passes to Connect.
	// The returned Files are owned by the queue pair: the caller sends them
	// and must not close them.
	LocalEndpoint() (Endpoint, error)
	// Connect moves the queue pair from QPInit to QPReady, paired with the
	// peer described by remote (ibv_modify_qp INIT->RTR->RTS). Connect takes
	// ownership of remote.Files (it closes them when it no longer needs
	// them, also on error). Both sides must call Connect; requests posted by
	// one side before the other's Connect wait, as on a NIC.
	Connect(remote Endpoint) error

	// PostSend posts a chain of send-queue work requests linked by Next
	// (ibv_post_send). Requests are validated in order; on the first one
	// that cannot be posted (queue full: ErrQueueFull; bad opcode, too many
	// SGEs, inline payload over MaxInline: ErrInvalid; QP still in QPInit:
	// ErrNotReady) PostSend returns it with an error and none from it on is
	// posted; the ones before it are posted. On a queue pair in QPError,
	// posting succeeds and every request completes with StatusFlushed, as
	// on a NIC.
	// Errors found later (a bad local or remote key, an out-of-range
	// offset or length, the peer gone) become error completions, never a
	// crash: the first failed request completes with its status, every
	// later one with StatusFlushed, and the queue pair moves to QPError.
	// When the peer dies, the request in progress completes with
	// StatusRetryExceeded or StatusFlushed, and all later ones with
	// StatusFlushed. Completions of one send queue arrive in post order.
	// A signaled request produces one completion on SendCQ; an unsignaled
	// one produces none when it succeeds but does on error. SGEs of a
	// request without SendInline are read when the request executes, which
	// may be after PostSend returns: the caller keeps them intact until the
	// request's completion (or that of a later signaled request).
	PostSend(wr *SendRequest) (bad *SendRequest, err error)

	// PostRecv posts a chain of receive requests linked by Next
	// (ibv_post_recv). Incoming SENDs and WRITE_WITH_IMMs consume posted
	// receives in order, each producing one completion on RecvCQ. Errors
	// are reported as for PostSend.
	PostRecv(wr *RecvRequest) (bad *RecvRequest, err error)

	// Close destroys the queue pair (ibv_destroy_qp). Outstanding requests
	// complete with StatusFlushed; the peer's queue pair moves to QPError.
	Close() error
}

// Opcode is a work request or completion opcode (enum ibv_wr_opcode and
// enum ibv_wc_opcode).
//
// Visibility: when a WRITE or WRITE_WITH_IMM completes at the sender, or a
// later request on the same queue pair is visible at the peer, its data is
// visible in the peer's region. A READ returns data no older than every
// WRITE to that memory that completed (at either side) before the READ was
// posted.
type Opcode uint8

const (
	OpWrite        Opcode = iota + 1 // one-sided write (IBV_WR_RDMA_WRITE)
	OpWriteWithImm                   // write, then consume a peer RECV carrying Imm (IBV_WR_RDMA_WRITE_WITH_IMM)
	OpRead                           // one-sided read into local SGEs (IBV_WR_RDMA_READ)
	OpSend                           // two-sided send into a posted RECV (IBV_WR_SEND)
	OpRecv                           // completion of a RECV (IBV_WC_RECV)
	OpRecvWithImm                    // completion of a RECV consumed by WRITE_WITH_IMM (IBV_WC_RECV_RDMA_WITH_IMM)
)

func (o Opcode) String() string {
	switch o {
	case OpWrite:
		return "WRITE"
	case OpWriteWithImm:
		return "WRITE_WITH_IMM"
	case OpRead:
		return "READ"
	case OpSend:
		return "SEND"
	case OpRecv:
		return "RECV"
	case OpRecvWithImm:
		return "RECV_WITH_IMM"
	}
	return "INVALID"
}

// SendFlags modify a send-queue work request (enum ibv_send_flags).
type SendFlags uint8

const (
	// SendSignaled asks for a completion on success (IBV_SEND_SIGNALED).
	SendSignaled SendFlags = 1 << iota
	// SendInline copies the payload described by the SGEs at post time, so
	// the caller may reuse that memory at once; the total must not exceed
	// QPConfig.MaxInline. Only WRITE, WRITE_WITH_IMM and SEND (IBV_SEND_INLINE).
	SendInline
	// SendFence makes the request wait until earlier READs have completed
	// (IBV_SEND_FENCE).
	SendFence
)

// SGE names local memory (struct ibv_sge, offset-based).
type SGE struct {
	Key    uint32 // local key of a Region of the same provider
	Offset uint64 // byte offset inside that region
	Length uint32 // bytes
}

// SendRequest is a send-queue work request (struct ibv_send_wr).
type SendRequest struct {
	ID         uint64 // returned in the completion (wr_id)
	Op         Opcode // OpWrite, OpWriteWithImm, OpRead or OpSend
	Flags      SendFlags
	SGEs       []SGE  // local source (WRITE, SEND) or destination (READ)
	RemoteAddr uint64 // WRITE, WRITE_WITH_IMM, READ: RemoteRegion.At(offset)
	RemoteKey  uint32 // WRITE, WRITE_WITH_IMM, READ: RemoteRegion.Key
	Imm        uint32 // WRITE_WITH_IMM, and SEND when HasImm
	HasImm     bool   // SEND with immediate (IBV_WR_SEND_WITH_IMM)
	Next       *SendRequest
}

// RecvRequest is a receive work request (struct ibv_recv_wr).
type RecvRequest struct {
	ID   uint64
	SGEs []SGE // where an incoming SEND lands; may be empty for WRITE_WITH_IMM
	Next *RecvRequest
}

// Status is a completion status (enum ibv_wc_status, reduced).
type Status uint8

const (
	StatusSuccess         Status = iota // IBV_WC_SUCCESS
	StatusLocalLength                   // IBV_WC_LOC_LEN_ERR: SEND larger than the RECV, or SGE beyond its region
	StatusLocalProtection               // IBV_WC_LOC_PROT_ERR: unknown local key or missing local access
	StatusRemoteAccess                  // IBV_WC_REM_ACCESS_ERR: bad remote key, range or rights
	StatusRemoteInvalid                 // IBV_WC_REM_INV_REQ_ERR: malformed request seen by the peer
	StatusFlushed                       // IBV_WC_WR_FLUSH_ERR: the queue pair entered QPError first
	StatusRetryExceeded                 // IBV_WC_RETRY_EXC_ERR: the peer is gone
)

func (s Status) String() string {
	switch s {
	case StatusSuccess:
		return "success"
	case StatusLocalLength:
		return "local length error"
	case StatusLocalProtection:
		return "local protection error"
	case StatusRemoteAccess:
		return "remote access error"
	case StatusRemoteInvalid:
		return "remote invalid request"
	case StatusFlushed:
		return "flushed"
	case StatusRetryExceeded:
		return "retry exceeded (peer gone)"
	}
	return "unknown status"
}

// Completion is a work completion (struct ibv_wc).
type Completion struct {
	ID      uint64 // wr_id of the request
	QP      uint32 // queue pair number the request belongs to
	Op      Opcode
	Status  Status
	ByteLen uint32 // RECV: bytes received; READ: bytes read
	Imm     uint32
	HasImm  bool
}

// CompletionQueue is a completion queue with its completion channel
// (struct ibv_cq + struct ibv_comp_channel). Poll may be called from one
// goroutine at a time; Arm, NotifyFD and AckNotify from any.
type CompletionQueue interface {
	// Poll moves up to len(out) completions into out, oldest first, and
	// returns how many (ibv_poll_cq). It never blocks.
	Poll(out []Completion) (int, error)
	// Arm requests one notification: the next completion added after Arm
	// (or one already queued when Arm is called) makes NotifyFD readable
	// (ibv_req_notify_cq). Arm-then-Poll-then-sleep loses no wakeup.
	Arm() error
	// NotifyFD returns a file descriptor that becomes readable when an
	// armed queue gets a completion; it can be watched with poll or epoll
	// (ibv_comp_channel.fd). Owned by the queue.
	NotifyFD() int
	// AckNotify consumes the pending notification so NotifyFD is no longer
	// readable (ibv_get_cq_event + ibv_ack_cq_events). It does not block:
	// with nothing pending it returns nil.
	AckNotify() error
	// Close destroys the queue (ibv_destroy_cq). Queue pairs using it must
	// be closed first.
	Close() error
}

// NotifyChanner is implemented by completion queues that live in this
// process (the shm provider's). Besides making NotifyFD readable, a
// notification sends on a Go channel: a goroutine waiting there is handed
// the processor by the goroutine that completed, where a wait on NotifyFD
// goes through the runtime's poller and costs a thread wakeup (25-30 us
// on these machines) per notification.
type NotifyChanner interface {
	// NotifyChan returns a channel of capacity 1 that receives a value
	// with every notification (Arm's contract holds for it as for
	// NotifyFD). AckNotify empties it too; a value left over is only a
	// spurious wakeup.
	NotifyChan() <-chan struct{}
}

// Errors returned by provider methods. Completion errors are Status values,
// not these.
var (
	ErrInvalid      = errors.New("invalid argument")
	ErrQueueFull    = errors.New("work queue full")
	ErrNotReady     = errors.New("queue pair not ready")
	ErrCQOverrun    = errors.New("completion queue overrun")
	ErrBusy         = errors.New("resource still in use")
	ErrClosed       = errors.New("closed")
	ErrNotSupported = errors.New("not supported")
)
