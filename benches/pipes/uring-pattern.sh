#!/bin/bash
# Submission pattern of one io_uring reader of 4 KiB random O_DIRECT blocks, with the settings of
# cost-per-request.sh (see there for FILE and how requests are counted):
#
#   benches/pipes/uring-pattern.sh TOOL DEPTH [fio options...]
#
# TOOL is an attune-bench binary (plus the options given, e.g. --submit-batch 0) or `fio`
# (fixedbufs=1, registerfiles=1, plus the options given, e.g. --iodepth_batch_submit=16
# --iodepth_batch_complete_min=16). One line per run: requests/s,
# CPU µs and context switches per request, requests in flight at the device, io_uring_enter
# calls per request, SQEs per io_uring_enter, completions per request (perf stat of the
# syscall and io_uring tracepoints over 3 s); then the most frequent (to_submit, min_complete)
# arguments of io_uring_enter over the next second, with their counts.
set -eu
tool=$1; qd=$2; shift 2
# shellcheck source=benches/pipes/device.sh
. "$(dirname "$0")/device.sh"
if [ "$tool" = fio ]; then
  fio --name=p --filename="$F" --rw=randread --bs=4096 --size=1G --direct=1 --time_based \
    --runtime=7s --norandommap --randrepeat=1 --ioengine=io_uring --iodepth=$qd --fixedbufs=1 \
    --registerfiles=1 "$@" --output-format=json >"$out/fio.json" 2>&1 &
  pid=$!; sleep 1.5; pids=$(pgrep -d, -x fio)
else
  "$tool" pipes io --file "$F" --file-size 1GiB --mechanisms io_uring --block-sizes 4096 \
    --queue-depths "$qd" --huge-pages off --seconds 10 --repeat 1 --no-fio "$@" >"$out/p.txt" 2>&1 &
  pid=$!; sleep 5.5; pids=$pid
fi
read -r a at < <(counters)
perf stat -x, -e task-clock,context-switches,syscalls:sys_enter_io_uring_enter,io_uring:io_uring_submit_req,io_uring:io_uring_complete \
  -p "$pids" -- sleep 3 2>"$out/perf.csv"
read -r b bt < <(counters)
perf record -q -e syscalls:sys_enter_io_uring_enter -p "$pids" -o "$out/rec.data" -- sleep 1 >/dev/null 2>&1
wait $pid || true
n=$((b - a))
awk -F, -v n="$n" -v t="$tool $*" -v qd="$qd" -v ms=$((bt - at)) '
  $3=="task-clock"{tc=$1} $3=="context-switches"{cs=$1}
  $3 ~ /sys_enter_io_uring_enter/{en=$1} $3 ~ /submit_req/{sq=$1} $3 ~ /io_uring_complete/{cq=$1}
  END{printf "%s qd=%s req/s=%.0f cpu_us/req=%.2f cs/req=%.2f device_qd=%.1f enters/req=%.2f sqe/enter=%.2f cqe/req=%.2f\n",
    t, qd, n/3, tc*1000/n, cs/n, ms/3000, en/n, sq/en, cq/n}' "$out/perf.csv"
perf script -i "$out/rec.data" 2>/dev/null | grep -o 'to_submit: 0x[0-9a-f]*, min_complete: 0x[0-9a-f]*' \
  | sort | uniq -c | sort -rn | head -6 | awk '{printf "   %s\n", $0}'
