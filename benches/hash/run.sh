#!/usr/bin/env bash
# Regenerates benches/results/hash-*.jsonl (every number in docs/vip-hashing.md).
# Usage: benches/hash/run.sh [roofline|lf|adaptive|adaptive1m|join|big|all]   (BIN: the harness)
# Every setting runs with three seeds (key set, popularity ranks and stream); docs report medians.
# Sizes are scaled so that the set runs in a few minutes on a shared 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [[ -z ${BIN:-} ]]; then
  cargo build --release -q -p attune-bench
  BIN=target/release/attune-bench
fi
B="$BIN hash --no-progress"
PIN="taskset -c 1"
command -v taskset >/dev/null || PIN=""
R=benches/results
what=${1:-all}

if [[ $what == roofline || $what == all ]]; then
  rm -f $R/hash-roofline.jsonl
  $PIN $B --mode roofline --zipf 0,0.5,1,1.5,2,2.5,3 --keys 1000000 --operations 10000000 \
    --seed 1,2,3 --out $R/hash-roofline.jsonl
fi
if [[ $what == lf || $what == all ]]; then
  rm -f $R/hash-loadfactor.jsonl
  $PIN $B --mode roofline --zipf 1,2,3 --keys 1000000 --load-factor 0.5,0.75,1,1.25,1.5 \
    --operations 10000000 --seed 1,2,3 --out $R/hash-loadfactor.jsonl
fi
if [[ $what == adaptive || $what == all ]]; then
  rm -f $R/hash-adaptive.jsonl
  A="--mode adaptive --keys 262144 --operations 30000000 --out $R/hash-adaptive.jsonl"
  S="--seed 1,2,3"
  # The static-popularity pair carries the two targets (zipf 0 and 1): five seeds. vip-oracle
  # (the roofline's build on the same stream) and vip-no-gather show what learning leaves out.
  $PIN $B $A --seed 1,2,3,4,5 --zipf 0,1 \
    --tables vip,vip-no-gather,vip-oracle,chained,hashbrown
  $PIN $B $A $S --zipf 1 --churn 25:6000000
  $PIN $B $A $S --zipf 1 --churn 50:600000
  $PIN $B $A $S --zipf 1 --mix 98:1:1
  $PIN $B $A --zipf 0 --tables vip-learn-always,chained
fi
if [[ $what == adaptive1m || $what == all ]]; then
  rm -f $R/hash-adaptive-1m.jsonl
  # The chapter's table size (1M keys): the arena (24 MB) no longer fits in L3.
  $PIN $B --mode adaptive --keys 1000000 --operations 60000000 --seed 1,2,3 --zipf 0,1 \
    --tables vip,vip-no-gather,vip-oracle,chained,hashbrown --out $R/hash-adaptive-1m.jsonl
fi
if [[ $what == join || $what == all ]]; then
  rm -f $R/hash-join.jsonl
  # |R| = 1.4 * 2^19 keys: the build table settles at load factor 1.4, as in the chapter.
  $PIN $B --mode join --keys 734003 --ratio 4,16,64 --zipf 0,1,2,3 --seed 1,2,3 \
    --out $R/hash-join.jsonl
fi
if [[ $what == big ]]; then
  rm -f $R/hash-roofline-10m.jsonl
  $PIN $B --mode roofline --zipf 0,1,2,3 --keys 10000000 --operations 20000000 \
    --out $R/hash-roofline-10m.jsonl
fi
