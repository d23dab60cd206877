/* sdpshim_bpf.h - the little of the kernel's types and of libbpf's
 * helper definitions that trace.c needs, so that generating the objects
 * needs nothing but clang (no vmlinux.h, no kernel or libbpf headers).
 * Kernel structs carry preserve_access_index: field offsets are relocated
 * against the running kernel's BTF at load time (CO-RE), so only the
 * names of the fields used matter, not their place. */
#ifndef SDPSHIM_BPF_H
#define SDPSHIM_BPF_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef int __s32;
typedef long long __s64;

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int(*name)[val]
#define __type(name, val) typeof(val) *name
#define __always_inline inline __attribute__((always_inline))

enum {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_RINGBUF = 27,
};
#define BPF_ANY 0
#define BPF_NOEXIST 1

/* Helpers, by their stable numbers (include/uapi/linux/bpf.h). */
static void *(*const bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*const bpf_map_update_elem)(void *map, const void *key, const void *value, __u64 flags) = (void *)2;
static __u64 (*const bpf_ktime_get_ns)(void) = (void *)5;
static __u64 (*const bpf_get_current_pid_tgid)(void) = (void *)14;
static long (*const bpf_get_current_comm)(void *buf, __u32 size) = (void *)16;
static __u64 (*const bpf_get_socket_cookie)(void *sk) = (void *)46;
static void *(*const bpf_ringbuf_reserve)(void *ringbuf, __u64 size, __u64 flags) = (void *)131;
static void (*const bpf_ringbuf_submit)(void *data, __u64 flags) = (void *)132;

/* Kernel types (CO-RE). Anonymous unions of the kernel's definitions are
 * left out: relocation finds a field by name through them. */
struct in6_addr {
	union {
		__u32 u6_addr32[4];
	} in6_u;
} __attribute__((preserve_access_index));

struct sock_common {
	__u32 skc_daddr;
	__u32 skc_rcv_saddr;
	__u16 skc_dport; /* network order */
	__u16 skc_num;   /* host order */
	unsigned short skc_family;
	struct in6_addr skc_v6_daddr;
	struct in6_addr skc_v6_rcv_saddr;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
	__u16 sk_type;
	__u16 sk_protocol;
} __attribute__((preserve_access_index));

/* Registers at a uprobe (the user's struct pt_regs); only argument
 * registers are read, at fixed offsets (no relocation needed). */
#if defined(__TARGET_ARCH_x86)
struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};
#define ARG1(r) ((r)->di)
#define ARG2(r) ((r)->si)
#define ARG3(r) ((r)->dx)
#elif defined(__TARGET_ARCH_arm64)
struct pt_regs {
	unsigned long regs[31];
	unsigned long sp, pc, pstate;
};
#define ARG1(r) ((r)->regs[0])
#define ARG2(r) ((r)->regs[1])
#define ARG3(r) ((r)->regs[2])
#else
#error "define __TARGET_ARCH_x86 or __TARGET_ARCH_arm64 (bpf2go -target does)"
#endif

#endif /* SDPSHIM_BPF_H */
