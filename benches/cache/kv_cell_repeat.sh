#!/usr/bin/env bash
# Issue 7, sixth session: one sweep cell as interleaved repeats of several binaries (each run:
# Symbiosis and the static splits minimum, M/2, M on one loaded database; settings of
# kv_sweep_more.sh). Example (the Zstd/hot10/0.6 cell, before this session against after):
#   COMP=zstd PATTERN=hot10 RATIO=0.6 BINS="target/ackv-s6base target/ackv-s6w" \
#     OUT=benches/results/cache-kv-sweep-s6-cells.jsonl benches/cache/kv_cell_repeat.sh
# Table (medians): python3 benches/cache/kv_s6_report.py benches/results/cache-kv-sweep-s6-cells.jsonl
set -euo pipefail
cd "$(dirname "$0")/../.."
BINS=${BINS:-target/ackv-s6w}
OUT=${OUT:-benches/results/cache-kv-sweep-s6-cells.jsonl}
REPEAT=${REPEAT:-3}
for rep in $(seq 1 "$REPEAT"); do
  for bin in $BINS; do
    "$bin" sweep --compressions "$COMP" --patterns "$PATTERN" --ratios "$RATIO" \
      --sample-inv 64 --reads 300000 --warmup 300000 --json "$OUT"
  done
done
