# sdpshim build. `make` builds the interposer, the Go core and the CLI;
# `make test` runs every test that can run on this machine; `make bench`
# the benchmarks; `make demo` the kernel-TCP vs sdpshim comparison.

GO      ?= go
CC      ?= gcc
BUILD   := build
GO_SRC  := $(shell find . -name '*.go' -not -path './build/*') go.mod go.sum

# core/direct compiles preload/c/direct.c and tenant.c through #includes, and
# preload/entry includes preload/c/sdpshim_core.h (the tables the core and
# the interposer share), which the go command's build cache does not track
# (it hashes the package's own files): a hash of those C sources in
# CGO_CFLAGS makes every go build and go test here recompile them when they
# change.
DIRECT_C := preload/c/direct.c preload/c/direct.h preload/c/tenant.c preload/c/tenant.h
CGO_CFLAGS ?= -O2 -g
CGO_CFLAGS += -DSDPSHIM_DIRECT_C_$(shell cat $(DIRECT_C) preload/c/sdpshim_core.h | sha1sum | cut -c1-12)
export CGO_CFLAGS

# Unit tests of the concurrent packages run with the race detector.
RACE_PKGS := ./core/... ./flowcontrol/... ./shim/...
TEST_FLAGS ?= -count=1 -shuffle=on -timeout=15m

.PHONY: all test unit integration bench demo clean vet

all: $(BUILD)/libsdpshim.so $(BUILD)/libsdpshim-core.so $(BUILD)/sdpshim

$(BUILD):
	mkdir -p $(BUILD)

# $(BUILD)/libsdpshim.so, the C interposer (flags in preload/c/build.sh).
include preload/c/Makefile.inc

# The core's runtime settings (preload/entry/godebug.conf, why there) are
# its compiled-in GODEBUG default; the program's GODEBUG still applies.
comma := ,
CORE_GODEBUG := $(subst $(eval) ,$(comma),$(strip $(shell sed -e '/^\#/d' preload/entry/godebug.conf)))
$(BUILD)/libsdpshim-core.so: $(GO_SRC) $(DIRECT_C) preload/entry/exports.map preload/entry/godebug.conf \
		$(wildcard preload/entry/*.c) probes/c/probe.c probes/c/probe.h preload/c/sdpshim_core.h | $(BUILD)
	$(GO) build -buildmode=c-shared -trimpath \
		-ldflags='-X=runtime.godebugDefault=$(CORE_GODEBUG) -extldflags=-Wl,--version-script=$(CURDIR)/preload/entry/exports.map' \
		-o $@ ./preload/entry
	rm -f $(BUILD)/libsdpshim-core.h

# The benchmarks' C programs are embedded in the CLI (go:embed): the go
# command rebuilds when they change, make must know to run it.
BENCH_C := $(wildcard bench/*/csrc/*.c bench/*/csrc/*.h)
$(BUILD)/sdpshim: $(GO_SRC) $(BENCH_C) | $(BUILD)
	$(GO) build -trimpath -o $@ ./cmd/sdpshim

vet:
	$(GO) vet ./...

unit: vet
	$(GO) test -race $(TEST_FLAGS) $(RACE_PKGS)
	$(GO) test $(TEST_FLAGS) $$($(GO) list ./... | grep -v -e /core -e /flowcontrol -e /shim -e /tests)
	# core/rdma against rdma-core (libibverbs, librdmacm); no device is
	# needed for what its tests run.
	$(GO) vet -tags rdma ./core/rdma
	$(GO) test -tags rdma $(TEST_FLAGS) ./core/rdma

integration: all
	SDPSHIM_BUILD=$(CURDIR)/$(BUILD) $(GO) test $(TEST_FLAGS) ./tests/...

test: unit integration

bench: all
	$(GO) test -run='^$$' -bench=. -benchtime=1x ./... > /dev/null
	$(BUILD)/sdpshim bench $(BENCH_ARGS)

# The bundled plain-sockets programs (demo/*.c) over kernel TCP, then under
# the shim, side by side. DEMO_ARGS passes flags (see `sdpshim help demo`).
demo: all
	$(BUILD)/sdpshim demo $(DEMO_ARGS)

clean:
	rm -rf $(BUILD)
