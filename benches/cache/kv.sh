#!/usr/bin/env bash
# Engine benchmark: Attune with adaptive cache sizing (Symbiosis) against static splits
# M_a = 1/8, 4/8, 7/8 of the cache budget, in both layouts, and RocksDB under the same cgroup,
# one run per access pattern. Rows go to benches/results/cache-kv.jsonl; docs/symbiosis.md
# ("Engine benchmark") has the tables, made by benches/cache/kv_report.py.
#
# memory_budget 64MiB = two 16 MiB memtables + a 32 MiB cache budget M; the cgroup limit adds
# 32 MiB for code, pinned indexes/filters and allocator slack. 150k YCSB records of 1 KB
# (152 MB logical, ~100 MB on disk with LZ4) are 2.4x the budget and 4.5x M.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release/attune-bench}  # copy it elsewhere if builds run meanwhile
OUT=${OUT:-benches/results/cache-kv.jsonl}
DIR=${DIR:-target/bench-cache-kv}
A="attune:memory_budget=64MiB;cache_sample_inv=2"
ENGINES="$A;cache_layout=user;cache_sizing=adaptive"
for s in 4MiB 16MiB 28MiB; do ENGINES="$ENGINES,$A;cache_layout=user;cache_sizing=$s"; done
# Kernel layout with pread (mmap_reads=false), as RocksDB reads: a mapped file under a cgroup
# limit thrashes on fault-around read-ahead (an aborted first run: minutes per phase at 16 MiB).
K="$A;mmap_reads=false;cache_layout=kernel"
ENGINES="$ENGINES,$K;cache_sizing=adaptive"
for s in 4MiB 16MiB 28MiB; do ENGINES="$ENGINES,$K;cache_sizing=$s"; done
ENGINES="$ENGINES,rocksdb:cache_size=32MiB,rocksdb:cache_size=16MiB"
# One run per access pattern, each appending its rows to OUT.
for dist in ${DISTS:-zipfian:0.99 uniform}; do
  "$BIN" kv ycsb --workloads load,c --records 150000 --operations 300000 --warmup-ops 300000 \
    --distribution "$dist" --compression lz4 --cache-size 32MiB --write-buffer-size 16MiB \
    --memory-limit 96MiB --cold --engines "$ENGINES" --dir "$DIR" --no-progress \
    --repeat "${REPEAT:-3}" --out "$OUT"
done
