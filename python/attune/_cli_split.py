"""CLI verb `attune split`: split a CSV or Parquet file into fact and dimension tables.

Prints the groups SplitGen chose and the size reduction; ``--json`` prints one object (groups,
input_bytes, output_bytes, ...); ``--explain`` prints ACT and EST for every step of the sweep.
A split that would not shrink the data is refused (exit 1) with the numbers.
"""

from __future__ import annotations

import argparse
import json

from attune.cli import add_output_flags, int_range, progress, size_bytes

STEPS = ("load", "stats", "keys", "dimensions", "write")


def register(sub) -> None:
    p = sub.add_parser(
        "split",
        help="split a CSV/Parquet file into a fact table and dimension tables (SplitGen)",
        description="Split INPUT into DIR (fact + dimension tables + schema.json). Open the "
        "result with attune.frames.connect(DIR) or read it back with attune.frames.read_split.",
    )
    p.add_argument("input", metavar="INPUT", help="input .csv or .parquet file")
    v = p.add_mutually_exclusive_group()
    v.add_argument(
        "--exact",
        dest="variant",
        action="store_const",
        const="exact",
        help="exact statistics; the split is guaranteed not to grow the data (default)",
    )
    v.add_argument(
        "--approx",
        dest="variant",
        action="store_const",
        const="approx",
        help="HyperLogLog distinct counts and average sizes (faster, no guarantee; measured)",
    )
    p.set_defaults(variant="exact")
    p.add_argument(
        "--storage",
        choices=("parquet", "duckdb"),
        default="parquet",
        help="Parquet files (default) or tables in one DuckDB database file",
    )
    p.add_argument(
        "--strategy",
        choices=("fd", "paper"),
        default="fd",
        help="fd (default): group the columns an exact functional dependency ties to a "
        "determinant, then Algorithm 6; paper: Algorithm 6 as printed",
    )
    p.add_argument(
        "--narrow-keys",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="estimate with the narrowest key integer instead of 8 bytes (keeps the exact "
        "guarantee; default: on with --strategy fd, off with paper, as printed)",
    )
    p.add_argument(
        "--max-dims",
        type=int_range(0),
        default=None,
        metavar="N",
        help="keep at most N dimensions, those saving the most (bounds the joins of any query; "
        "not in the source; default: no bound)",
    )
    p.add_argument("--encoding", default="utf-8", help="CSV text encoding (default utf-8)")
    p.add_argument("--name", default=None, help="table name recorded in schema.json")
    p.add_argument(
        "--memory-limit",
        type=size_bytes,
        default="4GB",
        help="DuckDB memory limit: a size such as 4GB, 512MiB (default 4GB)",
    )
    add_output_flags(
        p,
        out="output directory (new or empty)",
        out_metavar="DIR",
        out_required=True,
        json_help="print one JSON object",
    )
    p.add_argument("--explain", action="store_true", help="show ACT/EST for every SplitGen step")
    p.set_defaults(func=run)


def _explain_lines(plan, stats) -> list[str]:
    head = f"SplitGen ({plan.variant}, {plan.strategy}): {stats.nrows} rows, {len(stats.columns)} columns, "
    lines = [
        head + f"{stats.total_size} bytes",
        f"{'step':>4}  {'action':<6} {'ACT bytes':>14} {'EST bytes':>14}  candidate",
    ]
    for i, s in enumerate(plan.steps):
        lines.append(
            f"{i:>4}  {s.action:<6} {s.act:>14.0f} {s.est:>14.0f}  {', '.join(s.candidate)}"
        )
    return lines


def run(args) -> int:

    from attune._cli_deps import require

    require("attune split", "duckdb", "pyarrow", "sqlglot")
    from attune.frames import SplitError, split_file

    captured: dict = {}

    def on_plan(plan, stats):
        captured["plan"], captured["stats"] = plan, stats
        if args.explain and not args.json:
            print("\n".join(_explain_lines(plan, stats)))

    bar = progress(args, total=len(STEPS), desc="split", unit="step", leave=False)

    def on_step(step: str) -> None:
        bar.set_postfix_str(step)
        bar.n = STEPS.index(step)
        bar.refresh()

    try:
        res = split_file(
            args.input,
            args.out,
            variant=args.variant,
            storage=args.storage,
            encoding=args.encoding,
            name=args.name,
            progress=on_step,
            # Validated by size_bytes, passed as plain digits: nothing of the argument's text
            # reaches DuckDB's SQL.
            memory_limit=f"{args.memory_limit}B",
            on_plan=on_plan,
            narrow_keys=args.narrow_keys,
            max_dims=args.max_dims,
            strategy=args.strategy,
        )
    except SplitError as exc:
        bar.close()
        if args.json and args.explain and "plan" in captured:
            # The CLI prints the error object (attune.cli); the steps explain a refusal.
            exc.json_extra = {"steps": _steps_json(captured["plan"])}
        raise
    except KeyboardInterrupt:
        bar.close()
        raise  # the CLI prints "attune: interrupted" and exits 130
    except Exception as exc:
        bar.close()
        if _is_interrupt(exc):
            # Ctrl-C inside a DuckDB query surfaces as its "INTERRUPT Error: Interrupted!" or
            # "Query interrupted": the same as Ctrl-C anywhere else.
            raise KeyboardInterrupt from exc
        raise
    bar.n = len(STEPS)
    bar.close()
    if args.json:
        obj = res.to_json()
        if args.explain:
            obj["steps"] = _steps_json(res.plan)
        print(json.dumps(obj))
        return 0
    print(f"split {args.input} -> {res.out_dir} ({res.plan.variant}, {res.plan.strategy})")
    for g, n in zip(res.plan.dims, res.dim_rows):
        kind = "offset-coded in the fact" if g[0] in res.offsets else "dimension"
        print(f"  {kind} ({n} {'values' if g[0] in res.offsets else 'rows'}): {', '.join(g)}")
    print(f"  fact ({res.stats.nrows} rows): {', '.join(res.plan.fact) or '(keys only)'}")
    print(
        f"  logical size: {res.input_logical_bytes} -> {res.split_logical_bytes} bytes "
        f"({_pct(res.input_logical_bytes, res.split_logical_bytes)})"
    )
    print(
        f"  on disk: {res.input_bytes} -> {res.output_bytes} bytes "
        f"({_pct(res.input_bytes, res.output_bytes)})"
    )
    return 0


def _is_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is DuckDB reporting a query cut short by Ctrl-C
    (``duckdb.InterruptException``, or an error whose message says the query was interrupted)."""
    if type(exc).__name__ == "InterruptException":
        return True
    from_duckdb = type(exc).__module__.startswith("duckdb") or isinstance(exc, RuntimeError)
    return from_duckdb and "interrupt" in str(exc).lower()


def _pct(before: int, after: int) -> str:
    if before <= 0:
        return "n/a"
    pct = 100.0 * (before - after) / before
    return f"{pct:.1f}% smaller" if pct >= 0 else f"{-pct:.1f}% larger"


def _steps_json(plan) -> list[dict]:
    return [
        {"candidate": list(s.candidate), "act": s.act, "est": s.est, "action": s.action}
        for s in plan.steps
    ]
