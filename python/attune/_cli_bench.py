"""CLI verb ``attune bench``: run the benchmark harness and write reports.

Every benchmark starts here or from the ``attune-bench`` binary itself:

* ``attune bench micro|ycsb|engines ...`` run ``attune-bench kv micro|ycsb|engines`` with the same
  arguments (``--help`` shows the harness's own options; ``--out FILE`` appends JSON-lines rows,
  and ``--json FILE``, the older spelling, means the same here) and show a tqdm progress bar.
* ``attune bench hash ...`` runs ``attune-bench hash`` (:mod:`attune._cli_hash`).
* ``attune bench heimdall ...`` runs Heimdall's evaluation (:mod:`attune.bench.heimdall`).
* ``attune bench tinfetch ...`` runs the prefetchers' evaluation (:mod:`attune.bench.tinfetch`).
* ``attune bench evstore ...`` runs EVStore's accuracy and EVProx studies
  (:mod:`attune.bench.evstore`).
* ``attune bench device-sqlite ...`` runs the SQLite study of the SSD profiler on the simulated
  SSD (:mod:`attune.bench.device_sqlite`).
* ``attune bench cache-sim|cache-kv|embed|io|device|learn|workload|lookup-steps ...`` run the
  ``attune-bench``
  subcommand of that name with the same arguments.
* ``attune bench splitdf [run|column-sizes|explain|fact-layout|key-order|memory-probe|
  join-elimination|real-tables|report] ...`` runs the SplitDF scripts of ``benches/splitdf/`` (SplitDF is a
  Python component; the scripts need a source checkout).
* ``attune bench dag resharing|chain|decache|dabstep ...`` runs the pipelines benchmarks
  (:mod:`attune.bench.pipelines`): SIPC against Arrow IPC files and IPC over memory maps.
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

from attune.cli import add_output_flags, progress_enabled


def _legacy_json(argv: list[str]) -> tuple[list[str], bool]:
    """``--json FILE`` (a results file, as ``attune bench micro|ycsb`` took it before ``--json``
    became a flag; deprecated) becomes the harness's ``--out FILE``; a bare ``--json`` stays (rows
    on stdout). Returns the arguments and whether the deprecated spelling was used."""
    out: list[str] = []
    legacy = False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--json" and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            out += ["--out", argv[i + 1]]
            legacy = True
            i += 2
            continue
        if a.startswith("--json="):
            out += ["--out", a[len("--json=") :]]
            legacy = True
        else:
            out.append(a)
        i += 1
    return out, legacy


def _run_harness(args) -> int:
    from attune.bench import BenchError, run

    argv = list(args.harness_args)
    if args.bench_cmd in _LEGACY_JSON_FILE:
        argv, legacy = _legacy_json(argv)
        if legacy:
            print(
                f"attune bench {args.bench_cmd}: --json FILE is deprecated; use --out FILE "
                "(appends rows) and --json alone for rows on stdout",
                file=sys.stderr,
            )
    # The shared output flags, read from the harness's arguments: the CLI reports a failure as
    # the JSON error object under --json (see attune.cli).
    args.json = "--json" in argv
    args.no_progress = args.json or "--no-progress" in argv
    for i, a in enumerate(argv):
        if a.startswith("--json="):
            raise BenchError(
                f"--json is a flag (JSON on stdout); write a file with --out {a[7:]}", 2
            )
        if a == "--json" and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            raise BenchError(
                f"--json is a flag (JSON on stdout); write a file with --out {argv[i + 1]}",
                exit_code=2,
            )
    prefix = ["kv", args.bench_cmd] if args.bench_cmd in _KV else [args.bench_cmd]
    return run([*prefix, *argv], progress=not args.no_progress, json_errors=args.json)


def _run_place(args) -> int:
    from attune.bench import place

    return place.main(list(args.harness_args))


def _run_splitdf(args) -> int:
    from attune.bench import BenchError, splitdf

    argv = list(args.harness_args)
    args.json = "--json" in argv
    if argv and not argv[0].startswith("-") and argv[0] not in splitdf.SCRIPTS:
        raise BenchError(
            f"attune bench splitdf: unknown verb {argv[0]!r} "
            f"(one of: {', '.join(splitdf.SCRIPTS)})",
            exit_code=2,
        )
    return splitdf.run(argv)


def _run_dag(args) -> int:
    from attune.bench import pipelines

    argv = list(args.harness_args)
    args.json = "--json" in argv
    return pipelines.main(argv)


def _report(args) -> int:
    from attune._cli_deps import require

    require("attune bench report", "matplotlib")
    if args.figures:
        return _pages(args)
    from attune.bench import BenchError

    if not args.results or not args.out:
        raise BenchError("attune bench report: give RESULTS files and --out, or --figures", 2)
    from attune.bench.report import write_report

    parts = ["attune", "bench", "report", *args.results, "--out", args.out]
    baselines = args.baseline or ["rocksdb"]
    if args.baseline:
        _check_baselines(args.results, args.baseline)
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
        progress=progress_enabled(args) is not False,
    )
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"wrote {summary['out']} ({summary['rows']} rows, {len(summary['plots'])} plots)")
    return 0


def _check_baselines(results: list[str], baselines: list[str]) -> None:
    """A ``--baseline`` given on the command line must name an engine of the results it applies
    to (every file, or the one whose stem it names); the default may be absent (no ratios)."""
    from pathlib import Path

    from attune.bench import BenchError
    from attune.bench.report import _baseline_rows, _split_baselines, load_rows

    default, per_file = _split_baselines(baselines)
    rows = {Path(f).stem: load_rows(f) for f in results}
    for stem in per_file:
        if stem not in rows:
            raise BenchError(f"--baseline {stem}=...: no results file named {stem}", 2)
    wanted = [(default, [r for stem, rs in rows.items() if stem not in per_file for r in rs])]
    wanted += [(engine, rows[stem]) for stem, engine in per_file.items()]
    for engine, rs in wanted:
        if rs and not _baseline_rows(rs, engine):
            raise BenchError(f"--baseline {engine}: no row of that engine in the results", 2)


def _pages(args) -> int:
    from attune.bench import BenchError
    from attune.bench.pages import write_pages

    if args.results:
        raise BenchError("attune bench report: --figures takes no RESULTS files", 2)
    out = args.out or "docs/BENCHMARKS.md"
    parts = ["attune", "bench", "report", "--figures", args.figures]
    if args.out:
        parts += ["--out", args.out]
    summary = write_pages(
        args.figures,
        out,
        pages_dir=args.pages_dir,
        generator=" ".join(shlex.quote(a) for a in parts),
        progress=progress_enabled(args) is not False,
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
#: Verbs that took ``--json FILE`` (a results file) before ``--json`` became a flag everywhere;
#: they still accept it (deprecated: it means ``--out FILE``).
_LEGACY_JSON_FILE = ("micro", "ycsb")


def register(sub) -> None:
    p = sub.add_parser(
        "bench",
        help="benchmark Attune against RocksDB, LevelDB, WiredTiger, LMDB; write reports",
        description="Run a benchmark (the attune-bench harness or the SplitDF scripts) or write "
        "a report.",
    )
    verbs = p.add_subparsers(dest="bench_verb", metavar="COMMAND")
    for name, text in (
        (
            "micro",
            (
                "db_bench-style micro benchmarks (pass --help for the harness's options; "
                "--json FILE is a deprecated spelling of --out FILE)"
            ),
        ),
        (
            "ycsb",
            (
                "YCSB core workloads load, a..f (pass --help for the harness's options; "
                "--json FILE is a deprecated spelling of --out FILE)"
            ),
        ),
        ("engines", "list the engines and whether each can run here (--json for JSON lines)"),
        ("cache-sim", "Symbiosis and replacement policies on simulated traces (--help)"),
        ("cache-kv", "Symbiosis in the engine: sweep, dynamic, overhead, ablation (--help)"),
        ("embed", "embedding-store caches: hit rates by policy and size, L1 latency (--help)"),
        ("learn", "learned-index lookups against binary search (--help)"),
        ("workload", "speed of every attune-workload generator (--help)"),
        ("io", "Heimdall's quantised inference speed and the simulated SSD's (--help)"),
        ("device", "SSD profiler on planted simulated devices and the I/O rule checker (--help)"),
        (
            "device-kv",
            "Attune on the simulated SSD: fillrandom tuned by the profile, YCSB E prefetchers (--help)",
        ),
        ("lookup-steps", "point-lookup latency per step (a step-timing build; --help)"),
    ):
        q = verbs.add_parser(name, help=text, add_help=False, prefix_chars="+")
        q.add_argument("harness_args", nargs=argparse.REMAINDER)
        q.set_defaults(func=_run_harness, bench_cmd=name, no_progress=False)
    from attune import _cli_hash

    _cli_hash.add_parser(verbs)
    from attune.bench import hash_q9 as _bench_hash_q9

    _bench_hash_q9.add_parser(verbs)
    from attune.bench import heimdall as _bench_heimdall

    _bench_heimdall.add_parser(verbs)
    from attune.bench import tinfetch as _bench_tinfetch

    _bench_tinfetch.add_parser(verbs)
    from attune.bench import evstore as _bench_evstore

    _bench_evstore.add_parser(verbs)
    from attune.bench import device_sqlite as _bench_device_sqlite

    _bench_device_sqlite.add_parser(verbs)
    q = verbs.add_parser(
        "splitdf",
        help="SplitDF: split vs unsplit sizes, memory and a notebook (benches/splitdf/)",
        add_help=False,
        prefix_chars="+",
    )
    q.add_argument("harness_args", nargs=argparse.REMAINDER)
    q.set_defaults(func=_run_splitdf)
    q = verbs.add_parser(
        "place",
        help="Mosaic: placement strategies over device mixes, budget curve (model-only)",
        add_help=False,
        prefix_chars="+",
    )
    q.add_argument("harness_args", nargs=argparse.REMAINDER)
    q.set_defaults(func=_run_place)
    q = verbs.add_parser(
        "dag",
        help="Kelvin pipelines: resharing, a 10-node chain, DeCache and DABstep-shaped DAGs (--help)",
        add_help=False,
        prefix_chars="+",
    )
    q.add_argument("harness_args", nargs=argparse.REMAINDER)
    q.set_defaults(func=_run_dag)
    r = verbs.add_parser("report", help="write a markdown report with plots from results files")
    r.add_argument("results", nargs="*", help="JSON-lines results files")
    r.add_argument(
        "--figures",
        default=None,
        help="figure list (benches/figures.toml): write docs/BENCHMARKS.md and docs/bench/*.md",
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
    add_output_flags(
        r,
        out="markdown file to write, replaced (with --figures: default docs/BENCHMARKS.md)",
        json_help="print a JSON summary instead of text",
    )
    r.set_defaults(func=_report)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])
