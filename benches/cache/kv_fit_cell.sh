#!/usr/bin/env bash
# Issue 7, sixth session: the LZ4/hot30/1.0 cell (the last one below 0.97x the best static
# split) and its neighbours LZ4/hot30/0.8 and LZ4/hot20/1.0, before and after the exact
# second-tier footprint (ghost.rs `set_second_footprint`), as interleaved repeats: per repeat
# and cell, the binary before the change then the one after, each running Symbiosis and every
# static split (minimum, M/2, M) on the same loaded database. Settings of the sweep
# (kv_sweep_more.sh): M = 32 MiB, R = 1/64, 300 000 reads after 300 000 of warm-up, MemEnv.
# Rows: benches/results/cache-kv-sweep-s6-fit.jsonl; table (medians over repeats):
#   python3 benches/cache/kv_sweep_report.py --sweep cache-kv-sweep-s6-fit.jsonl --median
#
#   git stash/checkout 5c76caa && cargo build --release -p attune-cache-kv \
#     && cp target/release/attune-cache-kv target/ackv-s6base   # before
#   cargo build --release -p attune-cache-kv && cp target/release/attune-cache-kv target/ackv-s6
set -euo pipefail
cd "$(dirname "$0")/../.."
OLD=${OLD:-target/ackv-s6base}
NEW=${NEW:-target/ackv-s6}
OUT=${OUT:-benches/results/cache-kv-sweep-s6-fit.jsonl}
REPEAT=${REPEAT:-3}
S="--sample-inv 64 --reads 300000 --warmup 300000 --json $OUT"
for rep in $(seq 1 "$REPEAT"); do
  for cell in "hot30 1.0" "hot30 0.8" "hot20 1.0"; do
    set -- $cell
    for bin in "$OLD" "$NEW"; do
      "$bin" sweep --compressions lz4 --patterns "$1" --ratios "$2" $S
    done
  done
done
