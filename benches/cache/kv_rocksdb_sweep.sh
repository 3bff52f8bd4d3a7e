#!/usr/bin/env bash
# RocksDB at the same budget on the engine sweep's cells (patterns uniform, scrambled
# zipfian 0.99, hotspot 20/80; M/D_u 0.2, 0.6, 1.0; LZ4 and Zstd), with the harness and
# settings of benches/cache/kv.sh: YCSB C on 1 KB records, memory_budget 64 MiB (two 16 MiB
# memtables + M = 32 MiB) in a 96 MiB cgroup, pread reads, page cache dropped before each phase.
# Engines (cache_sample_inv=2 as in kv.sh, so that a round ends within the 300 000 warm-up
# operations): Attune adaptive in the kernel layout (buffered reads, the page cache is the second
# tier) and in the user layout (O_DIRECT + in-process compressed cache, the sweep's layout),
# RocksDB 7.8 with a 32 MiB block cache (all of M: kv.sh's "default" -- the harness's
# cache size) and with 16 MiB (50/50). Records = M / (M/D_u) / 1016 B, the sweep's key counts.
# Values come from the harness's compressible generator (db_bench's ratio 0.5), so Zstd's alpha
# here is not the sweep's 0.22. One run per engine and cell, engines one after another.
# Rows: benches/results/cache-kv-vs-rocksdb.jsonl (ops_per_sec, cpu_seconds, settings; the
# controller's timeline and MRC are dropped from settings.cache_tiers).
set -euo pipefail
cd "$(dirname "$0")/../.."
. benches/cache/kv_cell.sh
BIN=${BIN:-target/release/attune-bench}   # copy it elsewhere if builds run meanwhile
OUT=${OUT:-benches/results/cache-kv-vs-rocksdb.jsonl}
DIR=${DIR:-target/bench-cache-kv-sweep}
OPS=${OPS:-300000}
A="attune:memory_budget=64MiB;cache_sample_inv=2;mmap_reads=false;cache_sizing=adaptive"
ENGINES="$A;cache_layout=kernel,$A;cache_layout=user"
ENGINES="$ENGINES,rocksdb:cache_size=32MiB,rocksdb:cache_size=16MiB"
for comp in ${COMPS:-lz4 zstd}; do
  for ratio in ${RATIOS:-0.2 0.6 1.0}; do
    for dist in ${DISTS:-uniform scrambled:0.99 hotspot:0.2:0.8}; do
      run_cell "$ratio" "$dist" "$comp" "$OPS"
    done
  done
done
