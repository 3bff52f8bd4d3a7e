#!/usr/bin/env bash
# Issue 7, sixth session: every user-layout Zstd cell of the engine sweeps (the 9 of "Sweep,
# final" -- uniform, zipf, hot20 at M/D_u 0.2, 0.6, 1.0 -- and the 16 more of kv_sweep_more.sh:
# hot30 and hot10 at 0.2, 0.6, 1.0, all five patterns at 0.4 and 0.8) rerun after Zstd contexts
# became reused per thread (decompression ~7x cheaper, crates/attune-kv/src/zstd_ctx.rs) and
# with the exact second-tier footprint. Same settings as those sweeps (M = 32 MiB, R = 1/64,
# 300 000 reads after 300 000 of warm-up, user layout in MemEnv, CPU time + device reads x C_k).
# COMP=lz4 runs the same 25 cells with LZ4 (the final-code LZ4 rerun:
# COMP=lz4 BIN=... OUT=benches/results/cache-kv-sweep-s6-lz4-final.jsonl).
# Rows: benches/results/cache-kv-sweep-s6-zstd.jsonl; table:
#   python3 benches/cache/kv_s6_report.py benches/results/cache-kv-sweep-s6-zstd.jsonl
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/ackv-s6}   # a copy of target/release/attune-cache-kv
OUT=${OUT:-benches/results/cache-kv-sweep-s6-zstd.jsonl}
REPEAT=${REPEAT:-1}
S="--compressions ${COMP:-zstd} --sample-inv 64 --reads 300000 --warmup 300000 --json $OUT"
for rep in $(seq 1 "$REPEAT"); do
  "$BIN" sweep --patterns uniform,zipf,hot20,hot30,hot10 --ratios 0.2,0.6,1.0 $S
  "$BIN" sweep --patterns uniform,zipf,hot20,hot30,hot10 --ratios 0.4,0.8 $S
done
