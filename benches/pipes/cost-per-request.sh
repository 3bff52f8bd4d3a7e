#!/bin/bash
# CPU and context switches per request of one tool reading 4 KiB-aligned random blocks with
# O_DIRECT, as `attune-bench pipes io` runs it (figure pipes-io), measured where wall-clock
# throughput is distorted by other load on the machine:
#
#   benches/pipes/cost-per-request.sh TOOL MECHANISM BLOCK_BYTES DEPTH [attune-bench options]
#
# TOOL is an attune-bench binary or `fio` (io_uring: fixedbufs=1, registerfiles=1, as the
# harness passes; threads: psync with DEPTH jobs). MECHANISM is io_uring or threads. One line:
# requests/s, task-clock µs per request, context switches per request (`perf stat -p` over a
# 3 s window in the middle of the run, all threads of the tool) and the requests in flight at
# the block device (its read milliseconds over the window). Requests are those the block device
# holding FILE completed in the window, so other I/O on that device counts too.
# FILE: $PIPES_IO_FILE, default /var/tmp/attune-pipes-io.data (1 GiB, made by the harness).
set -eu
tool=$1; mech=$2; bs=$3; qd=$4; shift 4
# shellcheck source=benches/pipes/device.sh
. "$(dirname "$0")/device.sh"
if [ "$tool" = fio ]; then
  case $mech in
    io_uring) eng="--ioengine=io_uring --iodepth=$qd --fixedbufs=1 --registerfiles=1";;
    threads) eng="--ioengine=psync --numjobs=$qd --thread --group_reporting";;
    *) echo "mechanism: io_uring or threads" >&2; exit 2;;
  esac
  # shellcheck disable=SC2086
  fio --name=p --filename="$F" --rw=randread --bs="$bs" --size=1G --direct=1 --time_based \
    --runtime=6s --norandommap --randrepeat=1 $eng --output-format=json >"$out/fio.json" 2>&1 &
  pid=$!
  sleep 1.5
  pids=$(pgrep -d, -x fio)
else
  # The harness reads the whole file once first (about 3 s here), then runs the pipe 9 s.
  "$tool" pipes io --file "$F" --file-size 1GiB --mechanisms "$mech" --block-sizes "$bs" \
    --queue-depths "$qd" --huge-pages off --seconds 9 --repeat 1 --no-fio "$@" \
    >"$out/p.txt" 2>"$out/p.err" &
  pid=$!
  sleep 5.5
  pids=$pid
fi
read -r a at < <(counters)
perf stat -x, -e task-clock,context-switches -p "$pids" -- sleep 3 2>"$out/perf.csv"
read -r b bt < <(counters)
wait $pid
n=$((b - a))
awk -F, -v n="$n" -v t="$tool" -v m="$mech" -v bs="$bs" -v qd="$qd" -v ms=$((bt - at)) '
  $3=="task-clock"{tc=$1} $3=="context-switches"{cs=$1}
  END{printf "%-14s %-8s bs=%s qd=%-3s req/s=%7.0f cpu_us/req=%6.2f cs/req=%5.2f device_qd=%.1f\n",
    t, m, bs, qd, n/3, tc*1000/n, cs/n, ms/3000}' "$out/perf.csv"
