# Sourced by cost-per-request.sh and uring-pattern.sh: the data file the harness made ($F,
# from $PIPES_IO_FILE), `counters` (reads completed and read milliseconds of the block device
# holding it) and a scratch directory ($out) removed at exit.
F=${PIPES_IO_FILE:-/var/tmp/attune-pipes-io.data}
dev=$(stat -c %d "$F")
sysdev=/sys/dev/block/$((dev >> 8)):$((dev & 255))/stat
counters() { awk '{print $1, $4}' "$sysdev"; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
