#!/usr/bin/env bash
# Issue 7, sixth session: the dynamic scenarios of kv_convergence.sh (hot10 -> hot30 at M/D_u
# 0.2, hot20 -> hot10 at 0.6; Zstd, on-disk database, O_DIRECT reads, R = 1/64, 3 M reads per
# phase) rerun after Zstd contexts became reused per thread, REPEAT times interleaved per
# scenario, with the binaries given in BINS (default: this session's). Rows:
# benches/results/cache-kv-convergence-s6.jsonl, timelines cache-kv-convergence-s6/<n>.json;
# table: python3 benches/cache/kv_convergence_report.py --name cache-kv-convergence-s6
set -euo pipefail
NAME=${NAME:-cache-kv-convergence-s6}
BINS=${BINS:-target/ackv-s6} OUT=benches/results/$NAME.jsonl TL=benches/results/$NAME \
  REPEAT=${REPEAT:-3} exec "$(dirname "$0")/kv_convergence.sh"
