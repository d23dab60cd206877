//go:build ignore

/* trace.c - the eBPF programs of `sdpshim trace` (probes/trace.go loads
 * them; bpf2go compiles this file, see docs/observability.md).
 *
 *   probe_fallback, probe_accelerated   uprobes on the core library's
 *       probe functions (probes/c/probe.h): one event each on `events`;
 *       an accelerated connection's cookie goes into `accelerated`.
 *   sock_send / sock_recv   tp_btf sock_send_length / sock_recv_length:
 *       kernel-TCP payload bytes per (pid, socket cookie) in `conns`,
 *       split into bytes before and after the connection was accelerated.
 *   sock_state   tp_btf inet_sock_set_state: the TCP state per cookie in
 *       `states` (the pid is that of the connecting process for an active
 *       open, 0 when the change happened outside process context).
 */
#include "sdpshim_bpf.h"

#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6
#define SOCK_STREAM 1
#define MSG_PEEK 2
#define TCP_SYN_SENT 2
#define TCP_CLOSE 7

enum event_kind { EVENT_FALLBACK = 1, EVENT_ACCELERATED = 2 };

struct event {
	__u64 time_ns; /* CLOCK_MONOTONIC */
	__u64 cookie;
	__u32 pid;
	__u32 tid;
	__s32 kind; /* enum event_kind */
	__s32 code; /* reason (fallback) or transport (accelerated) */
	__s32 fd;
	__u32 pad;
	char comm[16];
};

struct tuple {
	__u8 saddr[16];
	__u8 daddr[16];
	__u16 sport;
	__u16 dport;
	__u16 family;
	__u16 pad;
};

struct conn_key {
	__u32 pid;
	__u32 pad;
	__u64 cookie;
};

struct conn_val {
	struct tuple tuple;
	__u64 sent, received;             /* payload bytes through kernel TCP */
	__u64 sent_accel, received_accel; /* of those, after the probe said accelerated */
	__u64 first_ns, last_ns;
	char comm[16];
};

struct state_val {
	struct tuple tuple;
	__u32 state; /* TCP_* */
	__u32 pid;   /* connecting process, 0 when unknown */
	__u64 time_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20); /* 16384 events */
	__type(value, struct event); /* for bpf2go -type */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct conn_key);
	__type(value, struct conn_val);
} conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct state_val);
} states SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);   /* socket cookie */
	__type(value, __u64); /* time_ns of the probe */
} accelerated SEC(".maps");

/* Events dropped because the ring buffer was full. */
__u64 events_lost SEC(".bss");

static __always_inline int emit(struct pt_regs *ctx, int kind)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&events_lost, 1);
		return 0;
	}
	__u64 id = bpf_get_current_pid_tgid();
	__u64 now = bpf_ktime_get_ns(), cookie = ARG3(ctx);
	e->time_ns = now;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->kind = kind;
	e->code = (__s32)ARG1(ctx);
	e->fd = (__s32)ARG2(ctx);
	e->cookie = cookie;
	e->pad = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
	/* Keys and values from the stack: the verifier takes no map arguments
	 * from a ring buffer record. */
	if (kind == EVENT_ACCELERATED && cookie != 0)
		bpf_map_update_elem(&accelerated, &cookie, &now, BPF_ANY);
	return 0;
}

SEC("uprobe")
int probe_fallback(struct pt_regs *ctx) { return emit(ctx, EVENT_FALLBACK); }

SEC("uprobe")
int probe_accelerated(struct pt_regs *ctx) { return emit(ctx, EVENT_ACCELERATED); }

/* is_tcp reports whether sk is an IPv4 or IPv6 TCP socket. */
static __always_inline int is_tcp(struct sock *sk)
{
	unsigned short family = sk->__sk_common.skc_family;
	return (family == AF_INET || family == AF_INET6) && sk->sk_protocol == IPPROTO_TCP &&
	       sk->sk_type == SOCK_STREAM;
}

static __always_inline void read_tuple(struct sock *sk, struct tuple *t)
{
	unsigned short family = sk->__sk_common.skc_family;
	__u32 *s = (__u32 *)t->saddr, *d = (__u32 *)t->daddr;
	t->family = family;
	t->sport = sk->__sk_common.skc_num;
	t->dport = __builtin_bswap16(sk->__sk_common.skc_dport);
	t->pad = 0;
	if (family == AF_INET) {
		s[0] = sk->__sk_common.skc_rcv_saddr;
		d[0] = sk->__sk_common.skc_daddr;
		s[1] = s[2] = s[3] = d[1] = d[2] = d[3] = 0;
		return;
	}
	s[0] = sk->__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr32[0];
	s[1] = sk->__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr32[1];
	s[2] = sk->__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr32[2];
	s[3] = sk->__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr32[3];
	d[0] = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32[0];
	d[1] = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32[1];
	d[2] = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32[2];
	d[3] = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32[3];
}

static __always_inline int count(struct sock *sk, int ret, int sending)
{
	if (ret <= 0 || !is_tcp(sk))
		return 0;
	struct conn_key key = {.pid = bpf_get_current_pid_tgid() >> 32};
	key.cookie = bpf_get_socket_cookie(sk);
	struct conn_val *v = bpf_map_lookup_elem(&conns, &key);
	if (!v) {
		struct conn_val init = {};
		read_tuple(sk, &init.tuple);
		init.first_ns = bpf_ktime_get_ns();
		bpf_get_current_comm(init.comm, sizeof(init.comm));
		bpf_map_update_elem(&conns, &key, &init, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&conns, &key);
		if (!v)
			return 0;
	}
	int accel = bpf_map_lookup_elem(&accelerated, &key.cookie) != 0;
	if (sending) {
		__sync_fetch_and_add(&v->sent, ret);
		if (accel)
			__sync_fetch_and_add(&v->sent_accel, ret);
	} else {
		__sync_fetch_and_add(&v->received, ret);
		if (accel)
			__sync_fetch_and_add(&v->received_accel, ret);
	}
	v->last_ns = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sock_send_length")
int sock_send(__u64 *ctx)
{
	return count((struct sock *)ctx[0], (int)ctx[1], 1);
}

SEC("tp_btf/sock_recv_length")
int sock_recv(__u64 *ctx)
{
	if ((int)ctx[2] & MSG_PEEK)
		return 0;
	return count((struct sock *)ctx[0], (int)ctx[1], 0);
}

SEC("tp_btf/inet_sock_set_state")
int sock_state(__u64 *ctx)
{
	struct sock *sk = (struct sock *)ctx[0];
	int newstate = (int)ctx[2];
	if (!is_tcp(sk))
		return 0;
	__u64 cookie = bpf_get_socket_cookie(sk);
	struct state_val v = {.state = newstate, .time_ns = bpf_ktime_get_ns()};
	read_tuple(sk, &v.tuple);
	struct state_val *old = bpf_map_lookup_elem(&states, &cookie);
	if (old)
		v.pid = old->pid;
	if (newstate == TCP_SYN_SENT)
		v.pid = bpf_get_current_pid_tgid() >> 32;
	bpf_map_update_elem(&states, &cookie, &v, BPF_ANY);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
