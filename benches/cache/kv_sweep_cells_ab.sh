#!/usr/bin/env bash
# Engine sweep cells, binary against binary: per repeat and cell, each binary in BINS in turn
# (e.g. the harness built before a change, then after it; interleaved so that machine load hits
# both alike), each run measuring Symbiosis and the static splits minimum, M/2 and M on one
# loaded database (`attune-bench cache-kv sweep`). Sweep settings: M = 32 MiB, R = 1/64,
# 300 000 reads after 300 000 of warm-up, MemEnv. The default cells are the fit points: the
# application tier's (Zstd hot10 and zipf at M/D_u 1.0), the second tier's (LZ4/hot30/1.0) and
# the footprint-growth cell (Zstd/hot10/0.6).
# Rows: OUT (default benches/results/cache-kv-sweep-fit-cells.jsonl), each with the commit its
# binary was built from (`machine.git_commit`); table (medians per binary and cell):
#   python3 benches/cache/kv_sweep_medians_report.py benches/results/cache-kv-sweep-fit-cells.jsonl
#
#   git checkout BEFORE && cargo build --release -p attune-bench \
#     && cp target/release/attune-bench target/attune-bench-before
#   git checkout AFTER && cargo build --release -p attune-bench \
#     && cp target/release/attune-bench target/attune-bench-after
#   BINS="target/attune-bench-before target/attune-bench-after" benches/cache/kv_sweep_cells_ab.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
BINS=${BINS:-target/release/attune-bench}
OUT=${OUT:-benches/results/cache-kv-sweep-fit-cells.jsonl}
REPEAT=${REPEAT:-3}
# CELLS="zstd uniform 0.6;zstd hot10 0.8" picks other cells (";"-separated "comp pattern ratio").
IFS=';' read -r -a CELLS <<< "${CELLS:-zstd hot10 1.0;zstd zipf 1.0;lz4 hot30 1.0;zstd hot10 0.6}"
S="--sample-inv 64 --reads 300000 --warmup 300000 --no-progress --out $OUT"
for rep in $(seq 1 "$REPEAT"); do
  for cell in "${CELLS[@]}"; do
    set -- $cell
    for bin in $BINS; do
      "$bin" cache-kv sweep --compressions "$1" --patterns "$2" --ratios "$3" $S > /dev/null
    done
  done
done
