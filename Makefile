# One task runner for Attune. `make demo` and `make test` are the two commands of the README; each
# installs what it needs (Debian packages when run as root, crates via cargo, Python packages into
# .venv/) and is quick when nothing changed.

SHELL := /bin/bash
PY ?= python3
VENV := .venv
STAMPS := .stamps
CARGO ?= cargo
export VIRTUAL_ENV := $(CURDIR)/$(VENV)
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

# Peers for the benchmark harness and db_bench for side-by-side runs (Debian bookworm names).
APT_PACKAGES := librocksdb-dev libleveldb-dev libwiredtiger-dev liblmdb-dev rocksdb-tools \
	pkg-config

RUST_SOURCES := $(shell find crates -name '*.rs' -o -name Cargo.toml 2>/dev/null) Cargo.toml
PY_SOURCES := $(shell find python/attune -name '*.py' 2>/dev/null) pyproject.toml

.PHONY: demo test setup build lint fmt rust-test py-test bench bench-vlog bench-report clean help
.PHONY: bench-learned

help:
	@echo "make demo   - build, load a data set into an Attune database, run a read/write mix"
	@echo "make test   - build and run every test (Rust and Python)"
	@echo "make lint   - cargo fmt --check, clippy -D warnings, ruff, stubtest of attune._native"
	@echo "make bench  - side-by-side micro benchmarks against RocksDB; regenerates docs/BENCHMARKS.md"
	@echo "make bench-vlog - value separation against RocksDB BlobDB (part of make bench)"
	@echo "make bench-learned - learned indexes off/always/analyzer vs RocksDB, LevelDB (~13 min)"
	@echo "make bench-bins - build the one benchmark harness (attune-bench) into .venv/bin"

setup: $(STAMPS)/apt $(STAMPS)/venv

$(STAMPS)/apt:
	@mkdir -p $(STAMPS)
	@missing=""; for p in $(APT_PACKAGES); do \
		dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = "0" ]; then \
			echo "installing Debian packages:$$missing"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
		else \
			echo "warning: not root, cannot install:$$missing (peer engines will be skipped)"; \
		fi; \
	fi
	@touch $@

$(STAMPS)/venv: pyproject.toml
	@mkdir -p $(STAMPS)
	@test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip 'maturin>=1.5,<2'
	@touch $@

# Build the native module and install the package (with its dev extras) into .venv.
$(STAMPS)/build: $(STAMPS)/venv $(RUST_SOURCES) $(PY_SOURCES)
	$(VENV)/bin/maturin develop --release --extras dev -q
	@touch $@

build: $(STAMPS)/apt $(STAMPS)/build $(STAMPS)/bench-bins

# The benchmark harness is one plain binary (no Python linkage); `attune bench` runs it.
$(STAMPS)/bench-bins: $(STAMPS)/venv $(RUST_SOURCES)
	$(CARGO) build --release -p attune-bench
	cp target/release/attune-bench $(VENV)/bin/
	@touch $@

.PHONY: bench-bins
bench-bins: $(STAMPS)/bench-bins

demo: build
	$(VENV)/bin/attune demo

rust-test: $(STAMPS)/apt
	$(CARGO) test --release --workspace --exclude attune-py

py-test: build
	$(VENV)/bin/python -m pytest -q python/tests

# The whole suite, timed: it stays under 15 minutes on a 2-core machine (CI allows 90).
test:
	@start=$$(date +%s); $(MAKE) --no-print-directory rust-test py-test; rc=$$?; \
	echo "make test: $$(( $$(date +%s) - start )) s in all (the suite's budget is 900 s)"; \
	exit $$rc

lint: build
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings
	$(VENV)/bin/ruff check python
	$(VENV)/bin/python -m mypy.stubtest attune._native

fmt:
	$(CARGO) fmt --all
	$(VENV)/bin/ruff format python

# Reproduces docs/BENCHMARKS.md: the side-by-side runs of the engine, then the generated report
# over every results file (the other files' own commands are recorded in their rows).
BENCH_RECORDS ?= 1000000
BENCH_RESULTS := micro ycsb vlog-1k vlog-4k vlog-scan100 rocksdb-vs-db_bench micro-peers \
	ycsb-peers hash-adaptive hash-join hash-loadfactor hash-roofline hash-roofline-10m splitdf \
	splitdf-columns learn cache cache-ablations \
	workload learned-readonly learned-randomload learned-range learned-delta learned-ycsb \
	learned-writes learned-memlimit learned-scale learned-load learned-delta-keysets vlog-mmap \
	vlog-mmap-4k cache-kv hot-key-cache hash-adaptive-1m learned-steps learned-writes-1m \
	splitdf-layout splitdf-memory cache-kv-sweep cache-kv-sweep-final cache-kv-dynamic \
	cache-kv-overhead cache-kv-rocksdb cache-kv-convergence cache-kv-sweep-s5 cache-kv-ablation \
	cache-kv-rocksdb-sweep cache-kv-rocksdb-sweep-r3 cache-kv-overhead-s5 cache-kv-kernel-cgroup \
	cache-kv-rocksdb-sweep-cgroup cache-kv-rocksdb-sweep-cgroup-r3 cache-kv-sweep-s6-fit \
	cache-kv-sweep-s6-zstd-final cache-kv-sweep-s6-cells cache-kv-convergence-s6 \
	learned-writes-1m-r5 learned-writes-1m-r5-eb15c6c cache-kv-rocksdb-sweep-cgroup-zstd-r3 \
	learned-writes-1m-leveldb learned-writes-1m-leveldb-long learned-writes-1m-leveldb-long-7a2769c \
	cache-kv-sweep-s6-lz4-final cache-kv-overhead-s6 cache-kv-overhead-s7 cache-kv-sweep-s7-fit \
	cache-kv-sweep-s7-zstd-final cache-kv-sweep-s7-lz4-final cache-kv-sweep-s7-lz4-hot10 \
	cache-kv-convergence-s7 block-cache-policy
# Value separation against RocksDB's BlobDB (db_bench --enable_blob_files), and Attune without it.
VLOG_ENGINES := attune,attune:enable_blob_files=false,db_bench,db_bench:enable_blob_files=1
VLOG_COMMON := --engines $(VLOG_ENGINES) --compression lz4 --cache-size 64MiB --repeat 2 \
	--no-progress
# `--out` appends, so each target removes the results files it rewrites first.
bench: build
	rm -f benches/results/micro.jsonl benches/results/ycsb.jsonl
	$(VENV)/bin/attune-bench kv micro --engines attune,rocksdb,rocksdb:bloom_bits=10,db_bench \
		--records $(BENCH_RECORDS) --compression lz4 --cache-size 64MiB --repeat 2 \
		--no-progress --out benches/results/micro.jsonl
	$(VENV)/bin/attune-bench kv ycsb --engines attune,rocksdb,leveldb,wiredtiger,lmdb \
		--workloads load,a,b,c,d,e,f --records $(BENCH_RECORDS) --operations 500000 \
		--distribution zipfian:0.99 --cache-size 64MiB --compression none --no-progress \
		--out benches/results/ycsb.jsonl
	$(MAKE) bench-vlog

bench-vlog: build
	rm -f benches/results/vlog-1k.jsonl benches/results/vlog-4k.jsonl \
		benches/results/vlog-scan100.jsonl
	$(VENV)/bin/attune-bench kv micro $(VLOG_COMMON) --value-size 1024 --records 500000 \
		--operations 200000 --benchmarks fillrandom,overwrite,readrandom,seekrandom \
		--seek-nexts 10 --out benches/results/vlog-1k.jsonl
	$(VENV)/bin/attune-bench kv micro $(VLOG_COMMON) --value-size 4096 --records 125000 \
		--operations 100000 --benchmarks fillrandom,overwrite,readrandom,seekrandom \
		--seek-nexts 10 --out benches/results/vlog-4k.jsonl
	$(VENV)/bin/attune-bench kv micro $(VLOG_COMMON) --value-size 1024 --records 500000 \
		--operations 50000 --benchmarks fillrandom,seekrandom --seek-nexts 100 \
		--out benches/results/vlog-scan100.jsonl
	$(MAKE) bench-report

# Learned indexes in the engine (docs/learned-index.md "Measured in the engine"): models off /
# always / analyzer beside RocksDB and LevelDB, about 13 minutes on 2 cores. The per-step
# breakdown needs a harness built with step timing; it gets its own target directory so that the
# instrumented engine never replaces the one every other benchmark measures.
STEP_TIMING_TARGET := target/step-timing
bench-learned: build
	benches/learned/run.sh $(VENV)/bin/attune-bench
	$(CARGO) build --release -p attune-bench --features step-timing \
		--target-dir $(STEP_TIMING_TARGET)
	rm -f benches/results/learned-steps.jsonl
	$(STEP_TIMING_TARGET)/release/attune-bench lookup-steps --records 200000 --gets 400000 \
		--repeat 3 --no-progress --out benches/results/learned-steps.jsonl
	$(VENV)/bin/python benches/learned/report.py benches/results

bench-report: build
	$(VENV)/bin/attune bench report $(BENCH_RESULTS:%=benches/results/%.jsonl) \
		--baseline rocksdb --baseline vlog-1k=db_bench:enable_blob_files=1 \
		--baseline vlog-4k=db_bench:enable_blob_files=1 \
		--baseline vlog-scan100=db_bench:enable_blob_files=1 \
		--baseline vlog-mmap=db_bench:enable_blob_files=1 \
		--baseline vlog-mmap-4k=db_bench:enable_blob_files=1 --out docs/BENCHMARKS.md

clean:
	rm -rf $(STAMPS) target

# Crash-consistency torture (docs/RELIABILITY.md): DURATION of each mode, simulated machine
# crashes with faults (mem) and then SIGKILLed children on the real file system (kill).
.PHONY: stress fuzz
DURATION ?= 60s
STRESS_SEED ?= 1
STRESS_THREADS ?= 4
stress:
	$(CARGO) build --release -p attune-stress
	target/release/attune-stress --mode mem --duration $(DURATION) --threads $(STRESS_THREADS) \
		--seed $(STRESS_SEED) --json
	target/release/attune-stress --mode kill --duration $(DURATION) --threads $(STRESS_THREADS) \
		--seed $(STRESS_SEED) --json

# Every cargo-fuzz target for FUZZ_SECONDS each (fuzz/run.sh; nightly or RUSTC_BOOTSTRAP=1).
FUZZ_SECONDS ?= 60
FUZZ_RUNS ?= -1
FUZZ_PARALLEL ?= 1
fuzz:
	fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_RUNS) $(FUZZ_PARALLEL)
