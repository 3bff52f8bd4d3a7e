#!/usr/bin/env bash
# Runs every cargo-fuzz target of fuzz/ for a bounded time and/or number of executions, starting
# from the valid seed inputs `attune-stress --write-fuzz-seeds` writes, and prints one summary line
# per target (executions, executions per second, crashes). A crash leaves its input in
# fuzz/artifacts/<target>/ and makes the script exit non-zero.
#
#   fuzz/run.sh SECONDS_PER_TARGET [RUNS_PER_TARGET (-1: no limit)] [PARALLEL]
#
# Uses the nightly toolchain when rustup has one, else stable with RUSTC_BOOTSTRAP=1. Built
# without a sanitizer (the harnessed code is safe Rust; overflow checks and debug assertions stay
# on), which roughly doubles executions per second.
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-60}
runs=${2:--1}
parallel=${3:-1}
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    tc=(+nightly)
else
    tc=()
    export RUSTC_BOOTSTRAP=1
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
mkdir -p logs corpus
(cd .. && cargo run -q --release -p attune-stress -- --write-fuzz-seeds fuzz/corpus)
cargo "${tc[@]}" fuzz build -s none
targets=$(cargo "${tc[@]}" fuzz list)
run_one() {
    local t=$1
    mkdir -p "corpus/$t"
    if cargo "${tc[@]}" fuzz run -s none "$t" "corpus/$t" -- -max_total_time="$seconds" \
        -runs="$runs" -print_final_stats=1 -rss_limit_mb=2048 >"logs/$t.log" 2>&1; then
        status=ok
    else
        status=CRASH
    fi
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "logs/$t.log" | grep -o '[0-9]*$' \
        || echo 0)
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "logs/$t.log" | grep -o '[0-9]*$' \
        || echo 0)
    echo "fuzz $t: $status, $execs executions, $rate exec/s (log: fuzz/logs/$t.log)"
    [ "$status" = ok ]
}
failed=0
running=0
for t in $targets; do
    if [ "$running" -ge "$parallel" ]; then
        wait -n || failed=1 # whichever target finishes first frees its slot
        running=$((running - 1))
    fi
    run_one "$t" &
    running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
    wait -n || failed=1
    running=$((running - 1))
done
exit $failed
