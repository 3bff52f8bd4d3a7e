#!/usr/bin/env bash
# Issue 7, seventh session: the application tier's fit point (Zstd hot10 and zipf at M/D_u 1.0)
# before and after the realised-sampling-share scale and the no-second-tier rule (ghost.rs
# `app_sampling_scale`, `predictions`), plus two cells the change could move (LZ4/hot30/1.0,
# the sixth session's second-tier fit point, and Zstd/hot10/0.6, the footprint-growth cell).
# Per repeat and cell: the binary before, then after; each run measures Symbiosis and the
# static splits minimum, M/2 and M on one loaded database. Sweep settings of kv_fit_cell.sh:
# M = 32 MiB, R = 1/64, 300 000 reads after 300 000 of warm-up, MemEnv.
# Rows: benches/results/cache-kv-sweep-s7-fit.jsonl; table (medians over repeats):
#   python3 benches/cache/kv_s6_report.py benches/results/cache-kv-sweep-s7-fit.jsonl
#
#   git checkout df0bc51 && cargo build --release -p attune-cache-kv \
#     && cp target/release/attune-cache-kv target/ackv-s7a     # before
#   (this commit) cargo build --release -p attune-cache-kv \
#     && cp target/release/attune-cache-kv target/ackv-s7h     # after (ackv-s7g: 9cfd904, the scale alone)
set -euo pipefail
cd "$(dirname "$0")/../.."
OLD=${OLD:-target/ackv-s7a}
NEW=${NEW:-target/ackv-s7h}
OUT=${OUT:-benches/results/cache-kv-sweep-s7-fit.jsonl}
REPEAT=${REPEAT:-3}
# CELLS="zstd uniform 0.6;zstd hot10 0.8" picks other cells (";"-separated "comp pattern ratio").
IFS=';' read -r -a CELLS <<< "${CELLS:-zstd hot10 1.0;zstd zipf 1.0;lz4 hot30 1.0;zstd hot10 0.6}"
S="--sample-inv 64 --reads 300000 --warmup 300000 --json $OUT"
for rep in $(seq 1 "$REPEAT"); do
  for cell in "${CELLS[@]}"; do
    set -- $cell
    for bin in "$OLD" "$NEW"; do
      "$bin" sweep --compressions "$1" --patterns "$2" --ratios "$3" $S
    done
  done
done
