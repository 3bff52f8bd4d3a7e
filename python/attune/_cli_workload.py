"""CLI verb `attune workload`: generate key sets, request streams, YCSB streams and block traces.

Subcommands write items one per line to stdout or append them to ``--out`` (``--out`` appends in
every verb, as the benchmark harness does) and, with ``--json``, print a JSON summary instead of
the items when no ``--out`` is given. Generations into ``--out`` show a progress
bar on stderr (on a terminal; ``--no-progress`` or ``--json`` turn it off). All generation is
deterministic for ``--seed``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections import Counter
from contextlib import nullcontext

from attune import workload as wl
from attune.cli import U32_MAX, U64_MAX, add_output_flags, int_range, progress


def _sink(args):
    if args.out:
        # --out appends, in every verb (docs/python.md): runs accumulate in one file.
        return open(args.out, "a", encoding="utf-8")  # closed by the caller (with)
    return nullcontext(sys.stdout)


def _progress(total: int, args):
    # Only while items go to a file: on the terminal they would be written over the bar.
    return progress(args, enabled=bool(args.out), total=total, unit="item")


def _emit(args, items, total: int, fmt) -> None:
    """Write ``fmt(item)`` lines unless only a JSON summary was asked for."""
    if args.json and not args.out:
        for _ in items:
            pass
        return
    with _sink(args) as f, _progress(total, args) as bar:
        for i, item in enumerate(items, 1):
            f.write(fmt(item))
            f.write("\n")
            if i % 65_536 == 0:
                bar.update(65_536)
        bar.update(total - bar.n)


def _keys(args) -> int:
    ks = wl.iter_keys(args.name, args.n, args.seed, order=args.order, as_bytes=args.bytes)
    first = wl.keys(args.name, args.n, args.seed, start=0, count=1)[0]
    last = wl.keys(args.name, args.n, args.seed, start=args.n - 1, count=1)[0]
    _emit(args, ks, args.n, (lambda k: k.hex()) if args.bytes else str)
    if args.json:
        summary = {"name": args.name, "n": args.n, "seed": args.seed, "order": args.order}
        summary.update({"min_key": first, "max_key": last, "out": args.out})
        print(json.dumps(summary))
    return 0


def _requests(args) -> int:
    counts: Counter[int] = Counter()

    def items():
        for x in wl.iter_requests(args.dist, args.n, args.count, args.seed):
            counts[x] += 1
            yield x

    _emit(args, items(), args.count, str)
    if args.json:
        top = counts.most_common(10)
        summary = {
            "dist": args.dist,
            "n": args.n,
            "count": args.count,
            "seed": args.seed,
            "distinct": len(counts),
            "top10": [[k, c] for k, c in top],
            "top10_share": sum(c for _, c in top) / max(args.count, 1),
            "out": args.out,
        }
        print(json.dumps(summary))
    return 0


def _ycsb(args) -> int:
    kinds: Counter[str] = Counter()
    total = args.records if args.phase == "load" else args.operations

    def items():
        for op in wl.ycsb(
            args.letter,
            args.records,
            args.operations,
            args.seed,
            phase=args.phase,
            insert_order=args.insert_order,
            field_length=args.field_length,
            field_count=args.field_count,
        ):
            kinds[op[0]] += 1
            yield op

    _emit(args, items(), total, lambda op: f"{op[0]},{op[1]},{op[2]}")
    if args.json:
        summary = {
            "workload": args.letter,
            "phase": args.phase,
            "records": args.records,
            "operations": args.operations,
            "seed": args.seed,
            "mix": {k: v / max(total, 1) for k, v in sorted(kinds.items())},
            "out": args.out,
        }
        print(json.dumps(summary))
    return 0


def _append_trace(args) -> int:
    """Writes the trace to a temporary file and appends it to ``--out`` (a binary trace is a
    sequence of records; a CSV trace keeps one header line, the first)."""
    with tempfile.TemporaryDirectory(prefix="attune-trace-") as tmp:
        path = os.path.join(tmp, f"trace.{args.fmt}")
        n = _write_trace(args, path)
        had_rows = os.path.exists(args.out) and os.path.getsize(args.out) > 0
        with open(path, "rb") as src, open(args.out, "ab") as dst:
            if args.fmt == "csv" and had_rows:
                src.readline()  # the header is already there
            shutil.copyfileobj(src, dst, 1 << 20)
    return n


def _trace(args) -> int:
    if args.out:
        n = _append_trace(args)
    elif args.fmt == "bin" and sys.stdout.isatty() and not args.json:
        raise wl.WorkloadError(
            "a binary trace is not for a terminal: give --out FILE, redirect stdout, "
            "or use --fmt csv"
        )
    else:
        # The generator writes files; stream its file to stdout (or, under --json without
        # --out, only count: the summary is the output, as for the other kinds).
        with tempfile.TemporaryDirectory(prefix="attune-trace-") as tmp:
            path = os.path.join(tmp, f"trace.{args.fmt}")
            n = _write_trace(args, path)
            if not args.json:
                sys.stdout.flush()
                with open(path, "rb") as f:
                    shutil.copyfileobj(f, sys.stdout.buffer, 1 << 20)
                sys.stdout.buffer.flush()
    if args.json:
        print(json.dumps({"records": n, "out": args.out, "fmt": args.fmt, "seed": args.seed}))
    elif args.out:
        print(f"wrote {n} records to {args.out}")
    return 0


def _write_trace(args, path: str) -> int:
    with progress(args, enabled=bool(args.out), total=1, unit="file") as bar:
        n = wl.write_trace(
            path,
            args.patterns,
            args.count,
            args.seed,
            fmt=args.fmt,
            size=args.size,
            range_bytes=args.range_bytes,
            write_fraction=args.write_fraction,
            combine=args.combine,
            mean_gap_ns=args.mean_gap_ns,
        )
        bar.update(1)
    return n


def register(sub) -> None:
    p = sub.add_parser("workload", help="generate key sets, request streams, YCSB, block traces")
    wsub = p.add_subparsers(dest="workload_cmd", metavar="KIND", required=True)

    def common(q, with_out=True):
        q.add_argument(
            "--seed", type=int_range(0, U64_MAX), default=0, help="stream seed (default 0)"
        )
        add_output_flags(
            q,
            out="append items to this file (created if missing) instead of stdout"
            if with_out
            else None,
            json_help="print a JSON summary (instead of the items, without --out)",
        )

    q = wsub.add_parser("keys", help="a sorted key set (linear, seg1, seg10, normal, osm, ...)")
    q.add_argument("name")
    q.add_argument("n", type=int_range(0, U64_MAX))
    q.add_argument("--order", default="sequential", help="sequential | random | random:SEED")
    q.add_argument("--bytes", action="store_true", help="16-byte big-endian keys, as hex")
    common(q)
    q.set_defaults(func=_keys)

    q = wsub.add_parser("requests", help="request items over [0, n) (zipfian:0.99, hotspot, ...)")
    q.add_argument("dist")
    q.add_argument("n", type=int_range(0, U64_MAX))
    q.add_argument("count", type=int_range(0, U64_MAX))
    common(q)
    q.set_defaults(func=_requests)

    q = wsub.add_parser("ycsb", help="a YCSB core workload (a-f) as op,key,n lines")
    q.add_argument("letter")
    q.add_argument("records", type=int_range(0, U64_MAX))
    q.add_argument("operations", type=int_range(0, U64_MAX))
    q.add_argument("--phase", default="run", choices=["load", "run"])
    q.add_argument("--insert-order", default="hashed", choices=["hashed", "ordered"])
    q.add_argument("--field-count", type=int_range(1, U32_MAX), default=10)
    q.add_argument("--field-length", type=int_range(1, U32_MAX), default=100)
    common(q)
    q.set_defaults(func=_ycsb)

    q = wsub.add_parser(
        "trace",
        help="a synthetic block-I/O trace (binary or CSV)",
        description="Writes a synthetic block-I/O trace to --out, or to stdout without it (a "
        "binary trace only when stdout is not a terminal). With --json and no --out, prints "
        "only a JSON summary.",
    )
    q.add_argument("patterns", nargs="+", help="seq | seq:RUN_LEN | stride:BYTES | random")
    q.add_argument("--count", type=int_range(0, U64_MAX), default=100_000)
    q.add_argument("--fmt", default="bin", choices=["bin", "csv"])
    q.add_argument(
        "--size", type=int_range(1, U64_MAX), default=4096, help="bytes per I/O (default 4096)"
    )
    q.add_argument(
        "--range-bytes", type=int_range(1, U64_MAX), default=1 << 30, help="region per stream"
    )
    q.add_argument("--write-fraction", type=float, default=0.0)
    q.add_argument("--combine", default="mixture", help="mixture | interleave:BURST")
    q.add_argument("--mean-gap-ns", type=float, default=1000.0)
    common(q)
    q.set_defaults(func=_trace)
