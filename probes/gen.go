package probes

// The eBPF objects are generated from bpf/trace.c and committed (a build
// needs no clang). Regenerate with `go generate ./probes` after changing
// the C; docs/observability.md says which clang.
//go:generate go tool bpf2go -cc clang-14 -strip llvm-strip-14 -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -type event -type conn_key -type conn_val -type state_val trace bpf/trace.c -- -I./bpf
