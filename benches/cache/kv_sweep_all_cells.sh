#!/usr/bin/env bash
# Every user-layout cell of the engine sweep for one compression (COMP, default zstd): the five
# patterns uniform, zipf, hot20, hot30, hot10 at M/D_u 0.2, 0.4, 0.6, 0.8 and 1.0 (25 cells),
# `attune-bench cache-kv sweep` with M = 32 MiB, R = 1/64, 300 000 reads after 300 000 of
# warm-up, user layout in MemEnv, latency = CPU time + device reads x C_k. REPEAT times.
# Rows: OUT (default benches/results/cache-kv-sweep-$COMP.jsonl); table:
#   python3 benches/cache/kv_sweep_medians_report.py OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release/attune-bench}   # copy it elsewhere if builds run meanwhile
COMP=${COMP:-zstd}
OUT=${OUT:-benches/results/cache-kv-sweep-$COMP.jsonl}
REPEAT=${REPEAT:-1}
S="--compressions $COMP --sample-inv 64 --reads 300000 --warmup 300000 --no-progress --out $OUT"
for rep in $(seq 1 "$REPEAT"); do
  "$BIN" cache-kv sweep --patterns uniform,zipf,hot20,hot30,hot10 --ratios 0.2,0.6,1.0 $S \
    > /dev/null
  "$BIN" cache-kv sweep --patterns uniform,zipf,hot20,hot30,hot10 --ratios 0.4,0.8 $S > /dev/null
done
