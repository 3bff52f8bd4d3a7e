#!/usr/bin/env bash
# The simulation's overhead like for like. Per cell one warm database at the split adaptive
# sizing settles at, in simulation-only mode (nothing adopted or resized), and 48 cycles of three
# 65 536-read segments in rotating order: A and A' with the round held, B with a round running
# back to back (`attune-bench cache-kv overhead --mode alternating`). RUNS runs of two cells
# (Zstd/uniform/0.2 and LZ4/hot20/1.0), interleaved. Rows: OUT (default
# benches/results/cache-kv-overhead.jsonl); table:
#   python3 benches/cache/kv_overhead_report.py --overhead OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release/attune-bench}   # copy it elsewhere if builds run meanwhile
OUT=${OUT:-benches/results/cache-kv-overhead.jsonl}
RUNS=${RUNS:-2}
for run in $(seq 1 "$RUNS"); do
  "$BIN" cache-kv overhead --mode alternating --pattern uniform --ratio 0.2 --compression zstd \
    --sample-inv 64 --cycles 48 --no-progress --out "$OUT" > /dev/null
  "$BIN" cache-kv overhead --mode alternating --pattern hot20 --ratio 1.0 --compression lz4 \
    --sample-inv 64 --cycles 48 --no-progress --out "$OUT" > /dev/null
done
