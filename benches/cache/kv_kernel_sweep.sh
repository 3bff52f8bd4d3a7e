#!/usr/bin/env bash
# Symbiosis on the kernel layout: the engine sweep's cells (every pattern x every M/D_u, one
# compression) on a real directory, each engine process in a memory cgroup whose page cache is
# the second tier, the page cache dropped before each phase (--cold). Per cell, in one run and on
# the same key stream: Attune adaptive and its own static splits M_a = 1 MiB (minimum), 16 MiB
# (M/2) and 32 MiB (M), RocksDB with a 32 MiB block cache (a third of the 96 MiB limit) and
# LevelDB with its default 8 MiB block cache (Snappy: its C API has no Zstd or LZ4). Engines are
# interleaved over REPEAT repeats; the report takes medians. ENGINES_OVERRIDE replaces the list
# (the published run dropped LevelDB after the first two cells: at M/D_u 0.2 it read at
# 0.7-1.7 K/s and took 1-2.5 minutes per cell), RATIOS and DISTS the cells.
# memory_budget 64 MiB = two 16 MiB memtables + M = 32 MiB; records = 32 MiB / (M/D_u) / 1016 B.
# YCSB C (point reads, 1 KB records), WARMUP operations unrecorded after the cold drop, then OPS.
# Rows: benches/results/cache-kv-kernel-sweep.jsonl (ratio added; the controller's per-window
# timeline and miss-ratio curve dropped to keep the file small). Table:
#   python3 benches/cache/kv_kernel_report.py benches/results/cache-kv-kernel-sweep.jsonl
set -euo pipefail
cd "$(dirname "$0")/../.."
. benches/cache/kv_cell.sh
BIN=${BIN:-target/release/attune-bench}   # copy it elsewhere if builds run meanwhile
OUT=${OUT:-benches/results/cache-kv-kernel-sweep.jsonl}
DIR=${DIR:-target/bench-cache-kv-kernel}
OPS=${OPS:-100000}
WARMUP=${WARMUP:-200000}
COMP=${COMP:-zstd}
A="attune:memory_budget=64MiB;cache_sample_inv=2;mmap_reads=false;cache_layout=kernel"
ENGINES="$A;cache_sizing=adaptive,$A;cache_sizing=1MiB,$A;cache_sizing=16MiB,$A;cache_sizing=32MiB"
ENGINES="$ENGINES,rocksdb:cache_size=32MiB,leveldb:cache_size=8MiB;compression=snappy"
ENGINES=${ENGINES_OVERRIDE:-$ENGINES}
for ratio in ${RATIOS:-0.2 0.6 1.0 0.4 0.8}; do
  for dist in ${DISTS:-uniform scrambled:0.99 hotspot:0.3:0.7 hotspot:0.2:0.8 hotspot:0.1:0.9}; do
    run_cell "$ratio" "$dist" "$COMP" "$WARMUP"
  done
done
