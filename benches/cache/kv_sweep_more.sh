#!/usr/bin/env bash
# Issue 7, engine sweep with the side-by-side round (this session): the Zstd/zipf/0.6 cell of
# "Sweep, final" re-run, then the cells the earlier sweeps left out -- hot30 and hot10 at
# M/D_u 0.2, 0.6, 1.0 and all five patterns at 0.4 and 0.8 -- in both compressions, with the
# same settings as the existing sweep (M = 32 MiB, R = 1/64, 300 000 reads after 300 000 of
# warm-up, user layout in MemEnv, CPU time + device reads x C_k). Rows:
# benches/results/cache-kv-sweep-s5.jsonl; table: kv_sweep_report.py --sweep cache-kv-sweep-s5.jsonl
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/ackv-s5c}   # a copy of target/release/attune-cache-kv
OUT=${OUT:-benches/results/cache-kv-sweep-s5.jsonl}
S="--sample-inv 64 --reads 300000 --warmup 300000 --json $OUT"
"$BIN" sweep --compressions zstd --patterns zipf --ratios 0.6 $S
for comp in lz4 zstd; do
  "$BIN" sweep --compressions "$comp" --patterns hot30,hot10 --ratios 0.2,0.6,1.0 $S
  "$BIN" sweep --compressions "$comp" --patterns uniform,zipf,hot20,hot30,hot10 \
    --ratios 0.4,0.8 $S
done
