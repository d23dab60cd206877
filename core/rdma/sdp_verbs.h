// C half of the rdma provider (build tag rdma, Linux). Small helpers
// around libibverbs and librdmacm so that Go never touches a union or a
// header macro, and so that a post or a poll is one cgo call. No helper
// keeps a pointer it is given; none receives a Go pointer.
#ifndef SDP_VERBS_H
#define SDP_VERBS_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

// One send request, flattened by translate.go (wireSend).
struct sdp_swr {
	uint64_t wr_id;
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t imm; // host order
	uint32_t sge; // index of the first SGE
	uint16_t num_sge;
	uint8_t opcode; // enum ibv_wr_opcode
	uint8_t flags;  // enum ibv_send_flags
};

// One receive request (wireRecv).
struct sdp_rwr {
	uint64_t wr_id;
	uint32_t sge;
	uint32_t num_sge;
};

// The part of struct ibv_wc sdpshim uses (wireCompletion).
struct sdp_wc {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t byte_len;
	uint32_t imm; // host order
	uint32_t qp_num;
	uint32_t flags;
};

// Result of a post: rc is the errno ibv_post_* returned (0: all posted);
// bad the index of the first request not posted.
struct sdp_post {
	int rc;
	int bad;
};

// sdp_build_send builds n struct ibv_send_wr in wrs, linked in order,
// from in[] and sges[] (all caller-owned C memory, reused across posts).
static inline void sdp_build_send(const struct sdp_swr *in, int n, struct ibv_sge *sges, struct ibv_send_wr *wrs)
{
	int i;

	for (i = 0; i < n; i++) {
		struct ibv_send_wr *w = &wrs[i];

		memset(w, 0, sizeof(*w));
		w->wr_id = in[i].wr_id;
		w->next = i + 1 < n ? &wrs[i + 1] : NULL;
		w->sg_list = in[i].num_sge ? &sges[in[i].sge] : NULL;
		w->num_sge = in[i].num_sge;
		w->opcode = (enum ibv_wr_opcode)in[i].opcode;
		w->send_flags = in[i].flags;
		w->imm_data = htonl(in[i].imm);
		w->wr.rdma.remote_addr = in[i].remote_addr;
		w->wr.rdma.rkey = in[i].rkey;
	}
}

// sdp_build_recv is sdp_build_send for receive requests.
static inline void sdp_build_recv(const struct sdp_rwr *in, int n, struct ibv_sge *sges, struct ibv_recv_wr *wrs)
{
	int i;

	for (i = 0; i < n; i++) {
		struct ibv_recv_wr *w = &wrs[i];

		memset(w, 0, sizeof(*w));
		w->wr_id = in[i].wr_id;
		w->next = i + 1 < n ? &wrs[i + 1] : NULL;
		w->sg_list = in[i].num_sge ? &sges[in[i].sge] : NULL;
		w->num_sge = in[i].num_sge;
	}
}

// sdp_post_send builds the chain and posts it with one ibv_post_send.
static inline struct sdp_post sdp_post_send(struct ibv_qp *qp, const struct sdp_swr *in, int n,
					    struct ibv_sge *sges, struct ibv_send_wr *wrs)
{
	struct sdp_post r = {0, -1};
	struct ibv_send_wr *bad = NULL;

	if (n <= 0)
		return r;
	sdp_build_send(in, n, sges, wrs);
	r.rc = ibv_post_send(qp, wrs, &bad);
	if (r.rc)
		r.bad = bad ? (int)(bad - wrs) : 0;
	return r;
}

// sdp_post_recv builds the chain and posts it with one ibv_post_recv.
static inline struct sdp_post sdp_post_recv(struct ibv_qp *qp, const struct sdp_rwr *in, int n,
					    struct ibv_sge *sges, struct ibv_recv_wr *wrs)
{
	struct sdp_post r = {0, -1};
	struct ibv_recv_wr *bad = NULL;

	if (n <= 0)
		return r;
	sdp_build_recv(in, n, sges, wrs);
	r.rc = ibv_post_recv(qp, wrs, &bad);
	if (r.rc)
		r.bad = bad ? (int)(bad - wrs) : 0;
	return r;
}

// What sdp_build_send produced, read back field by field (for tests:
// the build needs no device, so the translation can be checked to the
// last byte of struct ibv_send_wr here).
struct sdp_send_view {
	uint64_t wr_id;
	int next; // index of the next request, -1 for none
	int sge; // index of sg_list in sges, -1 for NULL
	int num_sge;
	int opcode;
	unsigned int send_flags;
	uint32_t imm_be; // imm_data as stored (network order)
	uint64_t remote_addr;
	uint32_t rkey;
};

static inline struct sdp_send_view sdp_view_send(const struct ibv_send_wr *wrs, const struct ibv_sge *sges, int i)
{
	struct sdp_send_view v;
	const struct ibv_send_wr *w = &wrs[i];

	v.wr_id = w->wr_id;
	v.next = w->next ? (int)(w->next - wrs) : -1;
	v.sge = w->sg_list ? (int)(w->sg_list - sges) : -1;
	v.num_sge = w->num_sge;
	v.opcode = w->opcode;
	v.send_flags = w->send_flags;
	v.imm_be = w->imm_data;
	v.remote_addr = w->wr.rdma.remote_addr;
	v.rkey = w->wr.rdma.rkey;
	return v;
}

// sdp_poll_cq polls up to n completions into the scratch array wc and
// copies what sdpshim needs into out. Returns ibv_poll_cq's result.
static inline int sdp_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc, struct sdp_wc *out)
{
	int k = ibv_poll_cq(cq, n, wc);
	int i;

	for (i = 0; i < k; i++) {
		out[i].wr_id = wc[i].wr_id;
		out[i].status = wc[i].status;
		out[i].opcode = wc[i].opcode;
		out[i].byte_len = wc[i].byte_len;
		out[i].imm = (wc[i].wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc[i].imm_data) : 0;
		out[i].qp_num = wc[i].qp_num;
		out[i].flags = wc[i].wc_flags;
	}
	return k;
}

// sdp_ack_cq_events consumes every pending event of a completion channel
// whose fd is non-blocking and that serves only cq. Returns 0, or the
// errno of a failure other than "nothing pending".
static inline int sdp_ack_cq_events(struct ibv_comp_channel *ch, struct ibv_cq *cq)
{
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	unsigned int n = 0;
	int err;

	errno = 0;
	while (ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0)
		n++;
	err = errno;
	if (n)
		ibv_ack_cq_events(cq, n);
	return (err == EAGAIN || err == EWOULDBLOCK) ? 0 : err;
}

// One asynchronous event, acknowledged already. err is 0 or the errno of
// ibv_get_async_event (EAGAIN: none pending).
struct sdp_async {
	int err;
	int type; // enum ibv_event_type
	uint32_t qp_num; // QP events
	struct ibv_cq *cq; // CQ events
	int port; // port events
};

static inline struct sdp_async sdp_get_async(struct ibv_context *ctx)
{
	struct sdp_async r;
	struct ibv_async_event ev;

	memset(&r, 0, sizeof(r));
	if (ibv_get_async_event(ctx, &ev)) {
		r.err = errno;
		return r;
	}
	r.type = ev.event_type;
	switch (ev.event_type) {
	case IBV_EVENT_CQ_ERR:
		r.cq = ev.element.cq;
		break;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		r.qp_num = ev.element.qp->qp_num;
		break;
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		r.port = ev.element.port_num;
		break;
	default:
		break;
	}
	ibv_ack_async_event(&ev);
	return r;
}

// Device and port facts Open needs.
struct sdp_dev {
	int err;
	int phys_port_cnt;
	int max_qp_wr;
	int max_sge;
	int max_cqe;
	int max_qp_rd_atom;
	int max_qp_init_rd_atom;
	uint64_t max_mr_size;
};

static inline struct sdp_dev sdp_query_device(struct ibv_context *ctx)
{
	struct sdp_dev r;
	struct ibv_device_attr a;

	memset(&r, 0, sizeof(r));
	r.err = ibv_query_device(ctx, &a);
	if (r.err)
		return r;
	r.phys_port_cnt = a.phys_port_cnt;
	r.max_qp_wr = a.max_qp_wr;
	r.max_sge = a.max_sge;
	r.max_cqe = a.max_cqe;
	r.max_qp_rd_atom = a.max_qp_rd_atom;
	r.max_qp_init_rd_atom = a.max_qp_init_rd_atom;
	r.max_mr_size = a.max_mr_size;
	return r;
}

struct sdp_port {
	int err;
	int state; // enum ibv_port_state
	int link_layer; // IBV_LINK_LAYER_*
	int active_mtu; // enum ibv_mtu
	uint16_t lid;
};

static inline struct sdp_port sdp_query_port(struct ibv_context *ctx, uint8_t port)
{
	struct sdp_port r;
	struct ibv_port_attr a;

	memset(&r, 0, sizeof(r));
	r.err = ibv_query_port(ctx, port, &a);
	if (r.err)
		return r;
	r.state = a.state;
	r.link_layer = a.link_layer;
	r.active_mtu = a.active_mtu;
	r.lid = a.lid;
	return r;
}

struct sdp_gid {
	int err;
	uint8_t raw[16];
};

static inline struct sdp_gid sdp_query_gid(struct ibv_context *ctx, uint8_t port, int index)
{
	struct sdp_gid r;
	union ibv_gid g;

	memset(&r, 0, sizeof(r));
	if (ibv_query_gid(ctx, port, index, &g)) {
		r.err = errno ? errno : EINVAL;
		return r;
	}
	memcpy(r.raw, g.raw, sizeof(r.raw));
	return r;
}

// sdp_create_qp creates an RC queue pair (NULL and errno on failure).
static inline struct ibv_qp *sdp_create_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
					   uint32_t max_send, uint32_t max_recv, uint32_t max_sge,
					   uint32_t max_inline)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof(a));
	a.send_cq = scq;
	a.recv_cq = rcq;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = 0;
	a.cap.max_send_wr = max_send;
	a.cap.max_recv_wr = max_recv;
	a.cap.max_send_sge = max_sge;
	a.cap.max_recv_sge = max_sge;
	a.cap.max_inline_data = max_inline;
	return ibv_create_qp(pd, &a);
}

// sdp_qp_to_init moves a new queue pair RESET -> INIT. Returns an errno.
static inline int sdp_qp_to_init(struct ibv_qp *qp, uint8_t port)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = port;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

// What the INIT -> RTR -> RTS transition needs (filled by qp_linux.go).
struct sdp_path {
	uint32_t dest_qpn;
	uint32_t rq_psn; // the peer's PSN
	uint32_t sq_psn; // ours
	uint16_t dlid;
	uint8_t port;
	uint8_t mtu; // enum ibv_mtu
	uint8_t global;
	uint8_t sgid_index;
	uint8_t min_rnr_timer;
	uint8_t timeout;
	uint8_t max_dest_rd_atomic; // READs we serve at once
	uint8_t max_rd_atomic; // READs we issue at once
	uint8_t dgid[16];
};

// Result of sdp_qp_connect: rc is 0 or an errno, stage the state that
// could not be reached.
struct sdp_connect {
	int rc;
	int stage;
};

// sdp_qp_connect moves a queue pair INIT -> RTR -> RTS.
static inline struct sdp_connect sdp_qp_connect(struct ibv_qp *qp, struct sdp_path p)
{
	struct sdp_connect r = {0, IBV_QPS_RTR};
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = (enum ibv_mtu)p.mtu;
	a.dest_qp_num = p.dest_qpn;
	a.rq_psn = p.rq_psn;
	a.max_dest_rd_atomic = p.max_dest_rd_atomic;
	a.min_rnr_timer = p.min_rnr_timer;
	a.ah_attr.dlid = p.dlid;
	a.ah_attr.sl = 0;
	a.ah_attr.src_path_bits = 0;
	a.ah_attr.port_num = p.port;
	a.ah_attr.is_global = p.global;
	if (p.global) {
		memcpy(a.ah_attr.grh.dgid.raw, p.dgid, sizeof(p.dgid));
		a.ah_attr.grh.sgid_index = p.sgid_index;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.grh.flow_label = 0;
		a.ah_attr.grh.traffic_class = 0;
	}
	r.rc = ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (r.rc)
		return r;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = p.timeout;
	a.retry_cnt = 7;
	a.rnr_retry = 7; // infinite: a SEND waits for its RECV
	a.sq_psn = p.sq_psn;
	a.max_rd_atomic = p.max_rd_atomic;
	r.stage = IBV_QPS_RTS;
	r.rc = ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC);
	return r;
}

// sdp_qp_to_error moves a queue pair to ERR, flushing its work.
static inline int sdp_qp_to_error(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

// sdp_qp_state returns the queue pair's state, or -errno.
static inline int sdp_qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr init;
	int rc;

	memset(&a, 0, sizeof(a));
	rc = ibv_query_qp(qp, &a, IBV_QP_STATE, &init);
	if (rc)
		return -rc;
	return a.qp_state;
}

// An IP address for rdma_cm, by value.
struct sdp_ip {
	int family; // AF_INET or AF_INET6
	uint8_t addr[16];
};

// sdp_cm_resolve_addr starts rdma_resolve_addr to ip. Returns 0 or errno.
static inline int sdp_cm_resolve_addr(struct rdma_cm_id *id, struct sdp_ip ip, int timeout_ms)
{
	struct sockaddr_in in4;
	struct sockaddr_in6 in6;
	struct sockaddr *sa;

	if (ip.family == AF_INET) {
		memset(&in4, 0, sizeof(in4));
		in4.sin_family = AF_INET;
		memcpy(&in4.sin_addr, ip.addr, 4);
		sa = (struct sockaddr *)&in4;
	} else {
		memset(&in6, 0, sizeof(in6));
		in6.sin6_family = AF_INET6;
		memcpy(&in6.sin6_addr, ip.addr, 16);
		sa = (struct sockaddr *)&in6;
	}
	if (rdma_resolve_addr(id, NULL, sa, timeout_ms))
		return errno ? errno : EINVAL;
	return 0;
}

// One rdma_cm event, acknowledged already; err is 0 or the errno of
// rdma_get_cm_event (EAGAIN: none pending).
struct sdp_cm_event {
	int err;
	int event; // enum rdma_cm_event_type
	int status;
};

static inline struct sdp_cm_event sdp_cm_next_event(struct rdma_event_channel *ch)
{
	struct sdp_cm_event r;
	struct rdma_cm_event *ev;

	memset(&r, 0, sizeof(r));
	if (rdma_get_cm_event(ch, &ev)) {
		r.err = errno ? errno : EIO;
		return r;
	}
	r.event = ev->event;
	r.status = ev->status;
	rdma_ack_cm_event(ev);
	return r;
}

// sdp_cm_device returns the name of the device an id is bound to, or NULL.
static inline const char *sdp_cm_device(struct rdma_cm_id *id)
{
	if (!id->verbs || !id->verbs->device)
		return NULL;
	return ibv_get_device_name(id->verbs->device);
}

#endif
