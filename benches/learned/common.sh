# Shared setup of the learned-index benchmark scripts (sourced by run.sh and writes.sh): the
# binary, output and scratch directories, the engines' names, the data shape and the `run`
# helper that appends one attune-bench kv ycsb invocation's rows to a results file.
BIN=${1:-.venv/bin/attune-bench}
OUT=benches/results
SCRATCH=${SCRATCH:-/tmp/attune-learned}
RECORDS=${RECORDS:-200000}
mkdir -p "$OUT" "$SCRATCH"
OFF=attune:learned_index=off
ALWAYS=attune:learned_index=always
# 16-byte keys, one 100-byte value per record, everything in memory (64 MiB cache for 23 MB data).
COMMON=(--field-count 1 --field-length 100 --cache-size 64MiB --compression none
        --no-progress --dir "$SCRATCH/db")

run() { # run OUTFILE ARGS...  (one attune-bench kv ycsb invocation appended to OUTFILE)
    local out=$1; shift
    "$BIN" kv ycsb "$@" "${COMMON[@]}" --out "$out"
}
fresh() { rm -f "$1"; }
