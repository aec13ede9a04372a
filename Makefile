# fidelnet: one command each to install, run, check, test and benchmark.
#
#   make run        install, then run the default scenario (7-node line) and print its report
#   make test       install (plus Debian's mininet: its examples are tests; BIRD 2), check, cargo test, pytest
#   make check      formatters and linters only (ruff, mypy, cargo fmt, clippy)
#   make flake      the privileged and scenario suites FLAKE_RUNS times: which tests flake
#   make bench      install (plus Debian's mininet as the peer), then bench/
#   make bench-scale  install, then bench/scale.py (time per node to 10,000 nodes)
#   make bench-links  install, then the link engine's fidelity benchmark (bench/links.py)
#   make bench-line   install, then `fidelnet bench line` (the CIMininet line beside Mininet)
#   make install    apt packages if missing, .venv with fidelnet, fidelnet-exec
#   make distclean  remove .venv, target and tool caches
#
# Idempotent, on a fresh Debian 12 or Ubuntu machine, as root: apt packages are
# installed only when missing, the virtualenv is rebuilt only when pyproject.toml
# changes, and cargo is incremental. `make -n <target>` shows what would run.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:

PYTHON     ?= python3
VENV       ?= .venv
CARGO      ?= cargo
BENCH_ARGS ?=
RUN_ARGS   ?=

# rustup installs cargo in ~/.cargo/bin, which non-login shells (CI) may not have on PATH.
ifeq ($(shell command -v $(CARGO)),)
  ifneq ($(wildcard $(HOME)/.cargo/bin/cargo),)
    export PATH := $(HOME)/.cargo/bin:$(PATH)
  endif
endif

# Run tests and the default scenario as an activated virtualenv would (fidelnet-exec is there).
VENV_PATH := PATH="$(CURDIR)/$(VENV)/bin:$$PATH"

# VM nodes (issue 12): QEMU; their guest image is built from Debian's kernel and
# busybox-static packages on first use (`fidelnet vm image`), fetched with apt.
# Container nodes (issue 37): crun, the OCI runtime (docs/containers.md).
APT_PACKAGES := iproute2 iperf3 iputils-ping util-linux procps python3-venv python3-pip \
                build-essential pkg-config ca-certificates tcpdump ethtool \
                chromium clang libbpf-dev bpftool traceroute qemu-system-x86 crun
# The distribution's Rust toolchain, only when there is no cargo (a rustup one is kept).
# Debian 12's `cargo` is 1.63, too old for workspace inheritance and lints; its
# `cargo-web` (a current toolchain kept up to date for browsers) installs /usr/bin/cargo.
OS_RELEASE   := $(shell . /etc/os-release 2>/dev/null && echo "$$ID-$$VERSION_ID")
APT_RUST     := $(if $(filter debian-12,$(OS_RELEASE)),\
                  cargo-web rustc-web rustfmt-web rust-web-clippy,\
                  cargo rustc rustfmt rust-clippy)
# The benchmark's peer: stock Mininet, whose LinuxBridge needs brctl.
APT_BENCH    := mininet bridge-utils
# What tests run in nodes besides: BIRD 2 for the OSPF failover scenario (issue 15),
# Open vSwitch for OVS switches (issue 16; each run starts its own daemons, the
# package's service is never started); for Mininet's examples: iptables (nat.py,
# natnet.py), OpenSSH's server (sshd.py, baresshd.py; never started as a service).
# Container nodes (issue 37) run under crun (in APT_PACKAGES); the tests build their
# images with buildah from a static busybox and Debian's BIRD (tests/_images.py).
APT_TEST     := $(APT_BENCH) bird2 openvswitch-switch openvswitch-testcontroller \
                iptables openssh-server buildah busybox-static
HAVE_CARGO   := $(or $(shell command -v $(CARGO)),$(wildcard $(HOME)/.cargo/bin/cargo))
APT_WANTED    = $(APT_PACKAGES) $(if $(HAVE_CARGO),,$(APT_RUST)) $(APT_EXTRA)

VENV_STAMP   := $(VENV)/.installed-pyproject
EXEC_BIN     := $(VENV)/bin/fidelnet-exec

.PHONY: help install apt-deps venv native k8s run check test flake fuzz soak bench bench-scale bench-links bench-line distclean

help:
	@sed -n '1,12s/^# \{0,1\}//p' $(firstword $(MAKEFILE_LIST))

## install: apt packages, the virtualenv with fidelnet in it, the Rust binaries
install: apt-deps venv native

# One dpkg query per package; apt-get (update, then install) only for what is missing.
apt-deps:
	scripts/apt-ensure $(APT_WANTED)

venv: $(VENV_STAMP)

$(VENV_STAMP): pyproject.toml | apt-deps
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $@

# The BPF programs (the routers' XDP fast path, the switches' learning switch), built
# from source with Debian's clang and libbpf headers.
# -mcpu=v3: 32-bit atomics (compare-and-swap in the switch's group lists; kernel 5.12+,
# and bpf_loop already needs 5.17).
BPF_OBJS     := build/bpf/fastpath.bpf.o build/bpf/l2switch.bpf.o
BPF_ARCH_INC := /usr/include/$(shell gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)

build/bpf/%.bpf.o: bpf/%.bpf.c | apt-deps
	mkdir -p $(dir $@)
	clang -O2 -g -Wall -Werror -target bpf -mcpu=v3 -I$(BPF_ARCH_INC) -c $< -o $@

# cargo decides what to rebuild; install -C copies only when the binary changed.
# fidelnet-exec starts every shell and command in a node: linked statically, each
# start skips the dynamic loader (0.36 ms less per start on this VM, docs/scale.md).
# An explicit --target keeps the static flag off build scripts; its own target dir
# keeps the rest of the workspace from rebuilding. fidelnet-vm (the VM nodes' guest
# agent and host-side client) is static too: it runs in guests whose libc may differ.
HOST_TRIPLE = $(or $(shell rustc -vV 2>/dev/null | sed -n 's/^host: //p'),x86_64-unknown-linux-gnu)
# The virtual-time clock shim (shim/vt.c), preloaded into dilated nodes' processes.
VT_SHIM := build/shim/libfidelnet-vt.so

VT_SHIM_SRC := $(wildcard shim/vt*.c)

$(VT_SHIM): $(VT_SHIM_SRC) shim/vt_internal.h | apt-deps
	mkdir -p $(dir $@)
	gcc -O2 -g -Wall -Wextra -Werror -fPIC -shared -o $@ $(VT_SHIM_SRC) -ldl -lpthread

native: venv $(BPF_OBJS) $(VT_SHIM)
	install -D -C -m 0644 -t $(VENV)/share/fidelnet/bpf $(BPF_OBJS)
	install -D -C -m 0755 -t $(VENV)/lib/fidelnet $(VT_SHIM)
	$(CARGO) build --release --workspace --locked
	RUSTFLAGS="-C target-feature=+crt-static" $(CARGO) build --release --locked -p fnexec \
	    -p fnvm --target $(HOST_TRIPLE) --target-dir target/static
	install -C -m 0755 target/static/$(HOST_TRIPLE)/release/fidelnet-exec $(EXEC_BIN)
	install -C -m 0755 target/static/$(HOST_TRIPLE)/release/fidelnet-vm $(VENV)/bin/fidelnet-vm
	install -C -m 0755 target/release/fidelnet-linkd $(VENV)/bin/fidelnet-linkd
	install -C -m 0755 target/release/fidelnet-pktgen $(VENV)/bin/fidelnet-pktgen

## run: the embedded default scenario (the 7-node line at 10 kpps, with checks); prints the report's path
run: install
	$(VENV_PATH) $(VENV)/bin/fidelnet run $(RUN_ARGS)

## check: formatting, lint and types, Python and Rust
check: venv
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

## fuzz: the long fuzz budget of every parser that takes users' text and of the engine's control
## protocol, link parameters and receiver (FUZZ_EXAMPLES per Python test, FUZZ_CASES per Rust one;
## each Rust case is up to 63 control lines, 119 link steps or 199 datagrams)
FUZZ_EXAMPLES ?= 20000
FUZZ_CASES ?= 40000
fuzz: install
	PROPTEST_CASES=$(FUZZ_CASES) $(CARGO) test --release --locked --workspace fuzz_ -- --nocapture
	FIDELNET_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) FIDELNET_FUZZ_RANDOM=1 $(VENV_PATH) $(VENV)/bin/pytest -q tests/unit/test_fuzz_inputs.py

## flake: the privileged and scenario suites FLAKE_RUNS times; lists every test that failed in
## some runs (FLAKY) or all (FLAKE_ARGS: other pytest paths and options; results in flake-results/)
FLAKE_RUNS ?= 3
FLAKE_ARGS ?=
flake: APT_EXTRA = $(APT_TEST)
flake: install
	$(VENV_PATH) $(VENV)/bin/python scripts/flake --runs $(FLAKE_RUNS) $(FLAKE_ARGS)

## soak: one long run (SOAK_MINUTES) and rounds of four runs at once, killed at random (bench/soak.py)
SOAK_MINUTES ?= 60
soak: install
	$(VENV)/bin/python bench/soak.py run --minutes $(SOAK_MINUTES)
	$(VENV)/bin/python bench/soak.py concurrent --rounds 3

## k8s: the test control plane (etcd, kube-apiserver, -controller-manager, -scheduler, kwok) built
## from the Go module proxy once per machine into ~/.cache/fidelnet/k8s (scripts/k8s-build; needs Go)
k8s:
	scripts/k8s-build

## test: everything CI runs (pytest exits 5 when it collects nothing: an error, on purpose)
# Two phases: first the tests marked `parallel` (every unit test not marked `timing`,
# and the privileged modules that assert only what was built and what answered) on two
# xdist workers, the privileged ones in one group so that one network at a time is
# built; then every other test alone on a quiet machine (tests/privileged/conftest.py).
test: APT_EXTRA = $(APT_TEST)
test: install check k8s
	$(CARGO) test --workspace --locked
	$(VENV_PATH) $(VENV)/bin/pytest -n 2 --dist loadgroup --durations=10 -m parallel tests
	$(VENV_PATH) $(VENV)/bin/pytest --durations=15 -m "not parallel" tests

## bench: build/teardown against stock Mininet (BENCH_ARGS=--quick for a short run)
bench: APT_EXTRA = $(APT_BENCH)
bench: install
	$(VENV)/bin/python bench/build_teardown.py $(BENCH_ARGS)

## bench-scale: build + teardown + kernel cleanup per node up to 10,000 nodes, beside Mininet
bench-scale: APT_EXTRA = $(APT_BENCH)
bench-scale: install
	$(VENV)/bin/python bench/scale.py $(BENCH_ARGS)

## bench-links: link fidelity of the engine against htb and veth (BENCH_ARGS=--quick: shorter)
bench-links: install
	$(VENV)/bin/python bench/links.py $(BENCH_ARGS)

## bench-line: the CIMininet 7-node line, fidelnet beside stock Mininet (report in fidelnet-results/)
bench-line: APT_EXTRA = $(APT_BENCH)
bench-line: install
	$(VENV_PATH) $(VENV)/bin/fidelnet bench line $(BENCH_ARGS)

## distclean: remove the virtualenv and cargo's target (`fidelnet clean` is something else:
## it removes kernel objects left by stale emulation runs)
distclean:
	rm -rf $(VENV) target build src/*.egg-info .mypy_cache .pytest_cache .ruff_cache
