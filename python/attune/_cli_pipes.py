"""CLI verb `attune pipes`: Data Pipes from the command line.

* ``attune pipes info`` — the mechanism the runtime chooses here, every fallback and why,
  and whether io_uring registered buffers and fixed files are available.
* ``attune pipes gen OUT --records N`` — writes sort-benchmark records (100 bytes each);
  ``--lines N`` writes N lines of 10–200 printable bytes instead.
* ``attune pipes sort IN OUT`` — the external sort on pipes under a memory limit (progress bar
  per phase; ``--json`` prints its report). The output appears only when complete.
  ``--lines`` sorts lines of any length (byte order of the whole line, as ``LC_ALL=C sort``).
* ``attune pipes bench io|sort ...`` — runs ``attune-bench pipes io|sort`` (mechanisms against
  fio; external sorts against GNU sort and DuckDB); every option is forwarded.
"""

from __future__ import annotations

import argparse
import json
import subprocess

import attune
from attune.cli import add_output_flags, int_range, progress, size_bytes


def _info(args) -> int:
    from attune import pipes

    report = pipes.Runtime(mechanism=args.mechanism).report()
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"mechanism           {report['mechanism']}")
    for fb in report["fallbacks"]:
        print(f"fallback            {fb}")
    reg = report["registered_buffers_refused"]
    fixed = report["fixed_files_refused"]
    if report["mechanism"] == "io_uring":
        print(f"registered buffers  {'yes' if reg is None else 'no: ' + reg}")
        print(f"fixed files         {'yes' if fixed is None else 'no: ' + fixed}")
    print(f"queue depth         {report['queue_depth']}")
    print(f"block bytes         {report['block_bytes']}")
    return 0


def _gen(args) -> int:
    from attune import pipes

    if (args.records is None) == (args.lines is None):
        raise attune.InvalidArgumentError("give one of --records N or --lines N")
    if args.lines is not None:
        lo, hi = args.line_bytes
        n = pipes.generate_lines(
            args.out_file, args.lines, min_bytes=lo, max_bytes=hi, seed=args.seed
        )
        if args.json:
            print(json.dumps({"path": args.out_file, "lines": args.lines, "bytes": n}))
        else:
            print(f"wrote {args.lines} lines ({n} bytes) to {args.out_file}")
        return 0
    n = pipes.generate_records(args.out_file, args.records, seed=args.seed)
    if args.json:
        print(json.dumps({"path": args.out_file, "records": args.records, "bytes": n}))
    else:
        print(f"wrote {args.records} records ({n} bytes) to {args.out_file}")
    return 0


def _sort(args) -> int:
    from attune import pipes

    bar = progress(args, unit="B", unit_scale=True, unit_divisor=1024, desc="runs")
    state = {"phase": None}

    def on_progress(phase: str, done: int, total: int) -> None:
        if phase != state["phase"]:
            state["phase"] = phase
            bar.reset(total=total)
            bar.set_description(phase)
        bar.n = done
        bar.refresh()

    try:
        report = pipes.sort(
            args.input,
            args.output,
            memory_bytes=args.memory,
            run_bytes=args.run_bytes,
            fan_in=args.fan_in,
            merge_fan_in=args.merge_fan_in,
            merge_select=args.merge_select,
            block_bytes=args.block_bytes,
            staging_dir=args.staging_dir,
            threads=args.threads,
            double_buffering=not args.no_double_buffering,
            early_spill=not args.no_early_spill,
            direct_io=not args.no_direct_io,
            mechanism=args.mechanism,
            progress=on_progress,
            record_format="lines" if args.lines else "fixed",
        )
    finally:
        bar.close()
    if args.json:
        print(json.dumps(report))
    else:
        mib = report["bytes"] / (1 << 20)
        rate = mib / report["seconds"] if report["seconds"] > 0 else 0.0
        print(
            f"sorted {report['records']} {'lines' if args.lines else 'records'} ({mib:.1f} MiB) in {report['seconds']:.2f} s "
            f"({rate:.1f} MiB/s): {report['spilled_runs']} runs spilled, "
            f"{report['merge_passes']} merge passes, mechanism {report['mechanism']}"
        )
    return 0


def _byte_range(text: str) -> tuple[int, int]:
    lo, sep, hi = text.partition("-")
    try:
        pair = (int(lo), int(hi if sep else lo))
    except ValueError:
        pair = (-1, -1)
    if pair[0] < 0 or pair[0] > pair[1]:
        raise argparse.ArgumentTypeError(f"{text!r} is not MIN-MAX with 0 <= MIN <= MAX")
    return pair


def _bench(args) -> int:
    from attune.bench import find_binary

    argv = [str(find_binary()), "pipes", args.mode, *args.rest]
    try:
        return subprocess.run(argv, check=False).returncode
    except OSError as exc:
        raise attune.Error(f"cannot run {argv[0]}: {exc}") from exc


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "pipes",
        help="Data Pipes: mechanism info, record generation, external sort, benchmarks",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="pipes_verb", metavar="VERB", required=True)

    mechs = ("auto", "io_uring", "threads", "mmap")
    info = sub.add_parser("info", help="the mechanism chosen here and every fallback")
    info.add_argument("--mechanism", choices=mechs, default="auto")
    add_output_flags(info)
    info.set_defaults(func=_info)

    gen = sub.add_parser(
        "gen", help="write sort-benchmark records (100 bytes, 10-byte key) or lines to sort"
    )
    gen.add_argument("out_file", metavar="OUT", help="the file to write")
    gen.add_argument("--records", type=int_range(0), help="number of 100-byte records")
    gen.add_argument("--lines", type=int_range(0), help="number of lines instead of records")
    gen.add_argument(
        "--line-bytes",
        type=_byte_range,
        default=(10, 200),
        metavar="MIN-MAX",
        help="characters per line without its newline, uniform (10-200)",
    )
    gen.add_argument("--seed", type=int_range(0), default=1, help="stream seed (default 1)")
    add_output_flags(gen)
    gen.set_defaults(func=_gen)

    s = sub.add_parser(
        "sort",
        help="external sort of 100-byte records (or of lines) under a memory limit",
        description="Sorts IN (100-byte records, 10-byte keys; with --lines, lines ended by a "
        "newline) into OUT; OUT appears only when the sort is complete (an error or Ctrl-C "
        "leaves none).",
    )
    s.add_argument("input", metavar="IN")
    s.add_argument("output", metavar="OUT")
    s.add_argument(
        "--lines",
        action="store_true",
        help="sort lines of any length up to --block-bytes, byte by byte on the whole line "
        "(LC_ALL=C sort's order); a last line without newline gets one",
    )
    s.add_argument("--memory", type=size_bytes, default=256 << 20, help="memory limit (256MiB)")
    s.add_argument("--fan-in", type=int_range(2, 64), default=4, help="runs per merge (4)")
    s.add_argument(
        "--merge-fan-in",
        type=int_range(2, 64),
        help="spilled runs per disk merge (default: all the memory holds, up to 64)",
    )
    s.add_argument(
        "--merge-select",
        choices=("loser-tree", "heap", "scan"),
        default="heap",
        help="how merges pick the next record (heap)",
    )
    s.add_argument(
        "--run-bytes", type=size_bytes, help="cache-run size (default: half the LLC per core)"
    )
    s.add_argument("--block-bytes", type=size_bytes, help="I/O block of spills and merges")
    s.add_argument("--staging-dir", help="where runs are spilled (default: OUT's directory)")
    s.add_argument("--threads", type=int_range(1, 1024), help="sorting threads (default: CPUs)")
    s.add_argument("--no-double-buffering", action="store_true", help="ablation: one buffer")
    s.add_argument("--no-early-spill", action="store_true", help="ablation: wait for each write")
    s.add_argument(
        "--no-direct-io", action="store_true", help="ablation: files through the page cache"
    )
    s.add_argument("--mechanism", choices=mechs, default="auto")
    add_output_flags(s, json_help="print the sort's report as one JSON object")
    s.set_defaults(func=_sort)

    b = sub.add_parser(
        "bench",
        help="attune-bench pipes io|sort (every option forwarded)",
        description="Runs attune-bench pipes MODE ...; `attune pipes bench io --help` lists the "
        "harness's options (--out, --json and --no-progress among them).",
    )
    b.add_argument("mode", choices=("io", "sort"), help="io: mechanisms vs fio; sort: sorts")
    b.add_argument("rest", nargs=argparse.REMAINDER, help="options for the harness")
    b.set_defaults(func=_bench)
