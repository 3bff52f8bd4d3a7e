"""CLI verb `attune place`: column placement on storage devices (Mosaic).

Subcommands: ``devices`` (the catalogue), ``trace`` (table scans per query from SQL), ``load``
(split Parquet tables into a column store), ``solve`` (a placement and its prediction),
``apply`` (migrate a store to a placement), ``advise`` (budget vs time, what to buy),
``verify``/``gc`` (a store's files).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from attune.cli import add_output_flags
from attune.errors import InvalidArgumentError


def register(sub) -> None:
    p = sub.add_parser(
        "place",
        help="place table columns on storage devices under a capacity or budget (Mosaic)",
        description="Column placement: device catalogue, workload traces, HOT/LOPT strategies, "
        "a per-column Parquet store and migration between placements. See docs/mosaic.md.",
    )
    ps = p.add_subparsers(dest="place_cmd", required=True, metavar="COMMAND")

    d = ps.add_parser("devices", help="print the device catalogue (Table 2.1 by default)")
    _devices_arg(d)
    d.add_argument("--toml", action="store_true", help="print it as a device file")
    add_output_flags(d)
    d.set_defaults(func=_devices)

    t = ps.add_parser("trace", help="table scans per query, extracted from SQL (SQLGlot)")
    t.add_argument("sql", nargs="*", metavar="FILE.sql", help="query files (default: TPC-H's 22)")
    add_output_flags(t, out="write the trace (JSON lines) to PATH (replaced)")
    t.set_defaults(func=_trace)

    ld = ps.add_parser("load", help="split Parquet tables into per-column files on devices")
    ld.add_argument("store", metavar="STORE", help="new store directory")
    ld.add_argument("tables", metavar="DIR", help="directory of TABLE.parquet files")
    _devices_arg(ld)
    ld.add_argument("--device", help="device for every column (default: the cheapest)")
    add_output_flags(ld)
    ld.set_defaults(func=_load)

    for name, helptext in (
        ("solve", "compute a placement and its predicted time and cost"),
        ("apply", "compute a placement and migrate the store to it"),
    ):
        s = ps.add_parser(name, help=helptext)
        s.add_argument("store", metavar="STORE", help="column store (sizes come from its files)")
        _devices_arg(s)
        s.add_argument("--trace", help="trace file (default: TPC-H's 22 queries)")
        s.add_argument("--strategy", choices=("lopt", "hot-column", "hot-table"), default="lopt")
        s.add_argument("--budget", type=float, metavar="CENTS", help="budget mode: a budget in ct")
        s.add_argument(
            "--capacity",
            action="append",
            default=[],
            metavar="DEVICE=SIZE",
            help="capacity of a device (repeatable; overrides the device file)",
        )
        s.add_argument(
            "--no-regression",
            action="store_true",
            help="no query may get slower than under the store's current placement",
        )
        s.add_argument("--sample", type=float, default=1.0, help="fraction of distinct scans")
        s.add_argument("--time-limit", type=float, default=5.0, help="solver time limit (s)")
        s.add_argument(
            "--decompose",
            choices=("auto", "on", "off"),
            default="auto",
            help="LOPT: solve each table alone first and add its bound (auto: on in budget "
            "mode, off in capacity mode)",
        )
        s.add_argument(
            "--no-secondary",
            action="store_true",
            help="drop the secondary objective (untouched columns to the cheapest device)",
        )
        add_output_flags(s)
        s.set_defaults(func=_solve if name == "solve" else _apply)

    a = ps.add_parser("advise", help="budget vs predicted time (Pareto curve) and what to buy")
    a.add_argument("store", metavar="STORE")
    _devices_arg(a)
    a.add_argument("--trace", help="trace file (default: TPC-H's 22 queries)")
    a.add_argument("--points", type=int, default=10, help="budgets on the curve")
    a.add_argument("--within", type=float, default=0.05, help="advice: within this of the best")
    a.add_argument("--time-limit", type=float, default=5.0, help="solver time limit per point")
    add_output_flags(a)
    a.set_defaults(func=_advise)

    for name, helptext in (
        ("verify", "check every column file against the manifest"),
        ("gc", "delete column files no manifest names"),
    ):
        v = ps.add_parser(name, help=helptext)
        v.add_argument("store", metavar="STORE")
        add_output_flags(v)
        v.set_defaults(func=_verify if name == "verify" else _gc)


def _devices_arg(p) -> None:
    p.add_argument("--devices", metavar="FILE.toml", help="device file (default: Table 2.1)")


def _devices(args) -> int:
    from attune.placement.devices import devices_to_toml, load_devices

    devs = load_devices(args.devices)
    if args.toml:
        sys.stdout.write(devices_to_toml(devs))
        return 0
    rows = [
        {
            "name": d.name,
            "cost_ct_per_gb": d.cost_ct_per_gb,
            "throughput_bps": d.throughput,
            "seek_ms": d.seek_s * 1000,
            "capacity": d.capacity,
            "readers": d.readers,
            "codec": d.codec,
            "mount": d.mount,
        }
        for d in devs
    ]
    if args.json:
        print(json.dumps(rows))
    else:
        for r in rows:
            cap = "-" if r["capacity"] is None else f"{r['capacity'] / 1e9:.1f} GB"
            print(
                f"{r['name']:10} {r['cost_ct_per_gb']:7.1f} ct/GB {r['throughput_bps'] / 1e9:6.2f} GB/s "
                f"seek {r['seek_ms']:.2f} ms  capacity {cap}  {r['codec']}"
            )
    return 0


def _workload_scans(trace_path):
    from attune.placement import trace as tr

    if trace_path:
        return tr.read_trace(trace_path)
    return tr.extract_workload(tr.tpch_queries(), tr.TPCH_SCHEMA)


def _trace(args) -> int:
    from attune.placement import trace as tr

    if args.sql:
        queries = {}
        for f in args.sql:
            try:
                queries[Path(f).stem] = Path(f).read_text(encoding="utf-8")
            except OSError as e:
                raise InvalidArgumentError(f"{f}: cannot read: {e}") from None
        scans = tr.extract_workload(queries, tr.TPCH_SCHEMA)
    else:
        scans = tr.extract_workload(tr.tpch_queries(), tr.TPCH_SCHEMA)
    if args.out:
        tr.write_trace(args.out, scans)
    recs = [
        {"query": q, "scans": [{"table": s.table, "columns": list(s.columns)} for s in v]}
        for q, v in scans.items()
    ]
    if args.json:
        print(json.dumps(recs))
    elif not args.out:
        for r in recs:
            print(
                r["query"],
                "; ".join(f"{s['table']}({', '.join(s['columns'])})" for s in r["scans"]),
            )
    return 0


def _load(args) -> int:
    from attune.placement import store as st
    from attune.placement.devices import load_devices

    src = Path(args.tables)
    tables = {p.stem: str(p) for p in sorted(src.glob("*.parquet"))}
    if not tables:
        raise InvalidArgumentError(f"{src}: no .parquet files")
    s = st.create_store(args.store, tables, load_devices(args.devices), default_device=args.device)
    out = {
        "store": str(s.root),
        "columns": len(s.columns),
        "bytes": sum(e["bytes"] for e in s.columns.values()),
    }
    print(
        json.dumps(out)
        if args.json
        else f"{out['columns']} columns, {out['bytes']} bytes in {s.root}"
    )
    return 0


def _setup(args):
    from attune.placement import store as st
    from attune.placement.devices import load_devices, parse_size
    from attune.placement.model import Workload

    s = st.open_store(args.store)
    devs = load_devices(args.devices)
    caps = {}
    for spec in getattr(args, "capacity", []):
        name, _, size = spec.partition("=")
        if name not in {d.name for d in devs}:
            raise InvalidArgumentError(f"--capacity: unknown device {name!r}")
        caps[name] = parse_size(size, f"--capacity {name}")
    devs = [d.with_capacity(caps.get(d.name, d.capacity)) for d in devs]
    w = Workload(s.model_columns(), _workload_scans(args.trace))
    return s, devs, w


def _run_solve(args):
    from attune.placement import strategies as sg

    s, devs, w = _setup(args)
    mode = "budget" if args.budget is not None else "capacity"
    kw = {"mode": mode}
    if args.strategy == "lopt":
        kw.update(
            budget_ct=args.budget,
            sample=args.sample,
            time_limit_s=args.time_limit,
            secondary=not args.no_secondary,
            no_regression=s.placement() if args.no_regression else None,
            decompose={"auto": None, "on": True, "off": False}[args.decompose],
        )
    elif (args.no_regression or args.budget is not None) and args.budget is None:
        raise InvalidArgumentError("--no-regression needs --strategy lopt")
    return s, devs, sg.solve(w, devs, args.strategy, **kw)


def _print_result(args, r, extra=None) -> None:
    d = r.to_dict() | (extra or {})
    if args.json:
        print(json.dumps(d))
        return
    print(
        f"{r.strategy} ({r.mode}): predicted {r.predicted_s:.3f} s, cost {r.cost_ct:.2f} ct, "
        f"solve {r.solve_s:.3f} s, {r.status}" + (f" (gap {r.gap:.2%})" if r.gap else "")
    )
    for n, b in r.used_bytes.items():
        print(f"  {n:10} {b / 1e6:10.1f} MB")
    for k, v in (extra or {}).items():
        print(f"  {k}: {v}")


def _solve(args) -> int:
    _, _, r = _run_solve(args)
    _print_result(args, r)
    return 0


def _apply(args) -> int:
    from attune.placement import store as st

    s, devs, r = _run_solve(args)
    moved = st.migrate(s, r.placement, devs)
    _print_result(args, r, moved)
    return 0


def _advise(args) -> int:
    from attune.placement import strategies as sg

    _, devs, w = _setup(args)
    curve = sg.pareto(w, devs, points=args.points, time_limit_s=args.time_limit)
    adv = sg.advise(curve, within=args.within)
    pts = [
        {
            "budget_ct": r.extra.get("budget_ct"),
            "cost_ct": r.cost_ct,
            "predicted_s": r.predicted_s,
            "status": r.status,
            "used_bytes": r.used_bytes,
        }
        for r in curve
    ]
    if args.json:
        print(json.dumps({"curve": pts, "advice": adv}))
        return 0
    for p in pts:
        print(
            f"budget {p['budget_ct']:9.2f} ct  cost {p['cost_ct']:9.2f} ct  "
            f"predicted {p['predicted_s']:.3f} s  {p['status']}"
        )
    buy = ", ".join(f"{n} {b / 1e9:.3f} GB" for n, b in adv["buy_bytes"].items())
    print(
        f"advice: spend {adv['cost_ct']:.2f} ct ({buy}) for {adv['predicted_s']:.3f} s, "
        f"within {adv['within']:.0%} of the best on the curve ({adv['best_predicted_s']:.3f} s)"
    )
    return 0


def _verify(args) -> int:
    from attune.placement import store as st

    problems = st.verify(st.open_store(args.store))
    print(json.dumps({"problems": problems}) if args.json else ("\n".join(problems) or "ok"))
    return 1 if problems else 0


def _gc(args) -> int:
    from attune.placement import store as st

    removed = st.gc(st.open_store(args.store))
    print(json.dumps({"removed": removed}) if args.json else f"removed {len(removed)} file(s)")
    return 0
