#!/usr/bin/env bash
# Issue 7, seventh session: the simulation's overhead like for like. Per cell one warm database
# at the split adaptive settles at, in simulation-only mode (nothing adopted or resized), and
# 48 cycles of three 65 536-read segments in rotating order: A and A' with the round held, B
# with a round running back to back (`attune-cache-kv overhead --mode alternating`). Two runs
# of the fifth/sixth sessions' two cells, interleaved. Rows:
# benches/results/cache-kv-overhead-s7.jsonl; table:
#   python3 benches/cache/kv_s7_report.py --overhead benches/results/cache-kv-overhead-s7.jsonl
#
#   cargo build --release -p attune-cache-kv && cp target/release/attune-cache-kv target/ackv-s7a
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/ackv-s7a}
OUT=${OUT:-benches/results/cache-kv-overhead-s7.jsonl}
RUNS=${RUNS:-2}
for run in $(seq 1 "$RUNS"); do
  "$BIN" overhead --mode alternating --pattern uniform --ratio 0.2 --compression zstd \
    --sample-inv 64 --cycles 48 --json "$OUT" > /dev/null
  "$BIN" overhead --mode alternating --pattern hot20 --ratio 1.0 --compression lz4 \
    --sample-inv 64 --cycles 48 --json "$OUT" > /dev/null
done
