"""CLI verb ``attune bench``: run the benchmark harness and write reports.

* ``attune bench micro ...`` / ``attune bench ycsb ...`` / ``attune bench engines`` run the
  ``attune-bench`` binary with the same arguments (``--help`` shows the harness's own options,
  ``--json FILE`` writes JSON-lines rows) and show a tqdm progress bar.
* ``attune bench report --figures benches/figures.toml`` writes the published pages,
  docs/BENCHMARKS.md and docs/bench/<component>.md, from the figure list (see
  :mod:`attune.bench.pages`).
* ``attune bench report RESULTS.jsonl [MORE.jsonl ...] --out report.md [--baseline rocksdb]``
  writes a markdown report with ratio tables and PNG plots (see :mod:`attune.bench.report`).

Thread-safety: runs on the CLI's main thread only.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys


def _run_harness(args) -> int:
    from attune.bench import run

    return run([args.bench_cmd, *args.harness_args], progress=not args.no_progress)


def _report(args) -> int:
    from attune._cli_deps import require

    require("attune bench report", "matplotlib")
    if args.figures:
        return _pages(args)
    if not args.results or not args.out:
        print("attune bench report: give RESULTS files and --out, or --figures", file=sys.stderr)
        return 2
    from attune.bench.report import write_report

    parts = ["attune", "bench", "report", *args.results, "--out", args.out]
    baselines = args.baseline or ["rocksdb"]
    for b in baselines:
        parts += ["--baseline", b]
    if args.plots_dir:
        parts += ["--plots-dir", args.plots_dir]
    command = " ".join(shlex.quote(a) for a in parts)
    summary = write_report(
        args.results,
        args.out,
        baseline=baselines,
        plots_dir=args.plots_dir,
        command=command,
        progress=not args.json,
    )
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"wrote {summary['out']} ({summary['rows']} rows, {len(summary['plots'])} plots)")
    return 0


def _pages(args) -> int:
    from attune.bench.pages import write_pages

    if args.results:
        print("attune bench report: --figures takes no RESULTS files", file=sys.stderr)
        return 2
    out = args.out or "docs/BENCHMARKS.md"
    parts = ["attune", "bench", "report", "--figures", args.figures]
    if args.out:
        parts += ["--out", args.out]
    summary = write_pages(
        args.figures,
        out,
        pages_dir=args.pages_dir,
        generator=" ".join(shlex.quote(a) for a in parts),
        progress=not args.json,
    )
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"wrote {summary['out']} and {len(summary['pages'])} pages "
            f"({summary['figures']} figures, {summary['rows']} rows, {len(summary['plots'])} plots)"
        )
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "bench",
        help="benchmark Attune against RocksDB, LevelDB, WiredTiger, LMDB; write reports",
        description="Run the attune-bench harness (micro, ycsb, engines) or write a report.",
    )
    verbs = p.add_subparsers(dest="bench_verb", metavar="COMMAND")
    for name, text in (
        ("micro", "db_bench-style micro benchmarks (pass --help for the harness's options)"),
        ("ycsb", "YCSB core workloads load, a..f (pass --help for the harness's options)"),
        ("engines", "list the engines and whether each can run here (--json for JSON lines)"),
    ):
        q = verbs.add_parser(name, help=text, add_help=False, prefix_chars="+")
        q.add_argument("harness_args", nargs=argparse.REMAINDER)
        q.set_defaults(func=_run_harness, bench_cmd=name, no_progress=False)
    from attune import _cli_hash

    _cli_hash.add_parser(verbs)
    r = verbs.add_parser("report", help="write a markdown report with plots from results files")
    r.add_argument("results", nargs="*", help="JSON-lines results files")
    r.add_argument(
        "--figures",
        default=None,
        help="figure list (benches/figures.toml): write docs/BENCHMARKS.md and docs/bench/*.md",
    )
    r.add_argument(
        "--out", default=None, help="markdown file to write (with --figures: docs/BENCHMARKS.md)"
    )
    r.add_argument(
        "--pages-dir",
        default=None,
        help="with --figures: component pages (default: bench/ next to --out)",
    )
    r.add_argument(
        "--baseline",
        action="append",
        default=None,
        help="engine the ratios are relative to (default rocksdb); repeat as FILE_STEM=ENGINE "
        "to choose another for one results file, e.g. --baseline vlog-1k=db_bench:enable_blob_files=1",
    )
    r.add_argument(
        "--plots-dir", default=None, help="where PNGs go (default: bench-plots/ next to --out)"
    )
    r.add_argument("--json", action="store_true", help="print a JSON summary instead of text")
    r.set_defaults(func=_report)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])
