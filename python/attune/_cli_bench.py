"""CLI verb ``attune bench``: run the benchmark harness and write reports.

Every benchmark starts here or from the ``attune-bench`` binary itself:

* ``attune bench micro|ycsb|engines ...`` run ``attune-bench kv micro|ycsb|engines`` with the same
  arguments (``--help`` shows the harness's own options; ``--out FILE`` appends JSON-lines rows,
  and ``--json FILE``, the older spelling, means the same here) and show a tqdm progress bar.
* ``attune bench hash ...`` runs ``attune-bench hash`` (:mod:`attune._cli_hash`).
* ``attune bench cache-sim|cache-kv|learn|workload|lookup-steps ...`` run the ``attune-bench``
  subcommand of that name with the same arguments.
* ``attune bench splitdf [run|column-sizes|explain|fact-layout|key-order|memory-probe|
  join-elimination|report] ...`` runs the SplitDF scripts of ``benches/splitdf/`` (SplitDF is a
  Python component; the scripts need a source checkout).
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


def _legacy_json(argv: list[str]) -> list[str]:
    """``--json FILE`` (a results file, as ``attune bench micro|ycsb`` always took it) becomes the
    harness's ``--out FILE``; a bare ``--json`` stays (rows on stdout)."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--json" and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            out += ["--out", argv[i + 1]]
            i += 2
            continue
        if a.startswith("--json="):
            out += ["--out", a[len("--json=") :]]
        else:
            out.append(a)
        i += 1
    return out


def _run_harness(args) -> int:
    from attune.bench import run

    argv = list(args.harness_args)
    if args.bench_cmd in ("micro", "ycsb"):
        argv = _legacy_json(argv)
    prefix = ["kv", args.bench_cmd] if args.bench_cmd in _KV else [args.bench_cmd]
    return run([*prefix, *argv], progress=not args.no_progress)


def _run_splitdf(args) -> int:
    from attune.bench import splitdf

    return splitdf.run(list(args.harness_args))


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


#: ``attune bench`` verbs that are ``attune-bench kv`` subcommands.
_KV = ("micro", "ycsb", "engines")


def register(sub) -> None:
    p = sub.add_parser(
        "bench",
        help="benchmark Attune against RocksDB, LevelDB, WiredTiger, LMDB; write reports",
        description="Run a benchmark (the attune-bench harness or the SplitDF scripts) or write "
        "a report.",
    )
    verbs = p.add_subparsers(dest="bench_verb", metavar="COMMAND")
    for name, text in (
        ("micro", "db_bench-style micro benchmarks (pass --help for the harness's options)"),
        ("ycsb", "YCSB core workloads load, a..f (pass --help for the harness's options)"),
        ("engines", "list the engines and whether each can run here (--json for JSON lines)"),
        ("cache-sim", "Symbiosis and replacement policies on simulated traces (--help)"),
        ("cache-kv", "Symbiosis in the engine: sweep, dynamic, overhead, ablation (--help)"),
        ("learn", "learned-index lookups against binary search (--help)"),
        ("workload", "speed of every attune-workload generator (--help)"),
        ("lookup-steps", "point-lookup latency per step (a step-timing build; --help)"),
    ):
        q = verbs.add_parser(name, help=text, add_help=False, prefix_chars="+")
        q.add_argument("harness_args", nargs=argparse.REMAINDER)
        q.set_defaults(func=_run_harness, bench_cmd=name, no_progress=False)
    from attune import _cli_hash

    _cli_hash.add_parser(verbs)
    q = verbs.add_parser(
        "splitdf",
        help="SplitDF: split vs unsplit sizes, memory and a notebook (benches/splitdf/)",
        add_help=False,
        prefix_chars="+",
    )
    q.add_argument("harness_args", nargs=argparse.REMAINDER)
    q.set_defaults(func=_run_splitdf)
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
