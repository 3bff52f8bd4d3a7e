"""`attune bench place mixes|pareto`: Mosaic's strategies on the model (model-only mode).

``mixes``: each of Table 2.1's four devices gets 0-100 % of the store's size in 20 % steps, the
shares summing to 100 % (56 configurations, source §2.5.3), plus ``--slack`` so whole columns
pack; HOT-table, HOT-column and LOPT each place the columns and the model predicts the TPC-H
run. ``pareto``: budget-mode LOPT over budgets (the curve of Figure 2.5/2.11).
One JSON row per placement, with the machine description.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys

from attune.errors import InvalidArgumentError


def mixes(step: int = 20, n: int = 4):
    for parts in itertools.product(range(0, 101, step), repeat=n - 1):
        last = 100 - sum(parts)
        if last >= 0:
            yield (*parts, last)


def machine_():
    from attune.bench import machine

    return machine()


def table_granular(w, devs) -> list[dict]:
    """Every table-granular placement of the four largest tables on HDD, SATA SSD and NVMe, the
    other tables on NVMe (source §2.5.2, Figure 2.6): one row each, cost (Eq. 2.5) and predicted
    run (model)."""
    from attune.placement.model import cost, total_time

    tables = w.tables()
    size = {t: sum(w.columns[k].size_on(devs[0]) for k in keys) for t, keys in tables.items()}
    big = sorted(tables, key=lambda t: -size[t])[:4]
    names = {d.name for d in devs}
    choice = [n for n in ("hdd", "sata", "nvme") if n in names] or [d.name for d in devs]
    fast = "nvme" if "nvme" in names else devs[0].name
    rows = []
    for combo in itertools.product(choice, repeat=len(big)):
        where = dict(zip(big, combo))
        placement = {k: where.get(t, fast) for t, keys in tables.items() for k in keys}
        rows.append(
            {
                "bench": "place-tables",
                "tables": where,
                "cost_ct": cost(w, devs, placement),
                "predicted_s": total_time(w, devs, placement),
            }
        )
    return rows


def _front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Pareto-optimal (cost, time) points: no other point is cheaper and faster."""
    out, best = [], float("inf")
    for c, t in sorted(points):
        if t < best:
            out.append((c, t))
            best = t
    return out


def summarize(rows: list[dict]) -> list[dict]:
    """Sums of the mixes rows: per strategy the predicted run summed over the mixes every
    strategy could place, the count of mixes each could place, LOPT's optimality; and of the
    measure rows: the median absolute error per budget."""
    import statistics

    out = []
    for r in rows:
        if r.get("bench") == "place-mixes" and "time_limit_s" not in r:
            # rows written before the field existed: the limit is in their command line
            words = str(r.get("command", "")).split()
            r["time_limit_s"] = (
                float(words[words.index("--time-limit") + 1]) if "--time-limit" in words else 5.0
            )
        if r.get("bench") == "place-mixes" and "lagrange_max" not in r:
            words = str(r.get("command", "")).split()
            r["lagrange_max"] = (
                int(words[words.index("--lagrange-iterations") + 1])
                if "--lagrange-iterations" in words
                else 1
            )
    solver = [r for r in rows if r.get("bench") == "place-mixes" and r["strategy"] == "lopt"]
    keys = {
        (r["time_limit_s"], r["lagrange_max"], r.get("scale", 1.0), r.get("decompose", "auto"))
        for r in solver
    }
    for limit, lag, sc, dec in sorted(keys):
        rs = [
            r
            for r in solver
            if r["time_limit_s"] == limit
            and r["lagrange_max"] == lag
            and r.get("scale", 1.0) == sc
            and r.get("decompose", "auto") == dec
            and "solve_s" in r
        ]
        out.append(
            {
                "bench": "place-solver-summary",
                "time_limit_s": limit,
                "lagrange_iterations": lag,
                "scale": sc,
                "decompose": dec,
                "median_bound_over_time": statistics.median(
                    r["bound_s"] / r["predicted_s"] for r in rs if r["predicted_s"] > 0
                ),
                "mixes": len(rs),
                "optimal": sum(1 for r in rs if r["status"] == "optimal"),
                "optimal_within_5s": sum(
                    1 for r in rs if r["status"] == "optimal" and r["solve_s"] <= 5.0
                ),
                "optimal_within_5s_cpu": sum(
                    1 for r in rs if r["status"] == "optimal" and r["solve_cpu_s"] <= 5.0
                ),
                "median_solve_s": statistics.median(r["solve_s"] for r in rs),
                "median_solve_cpu_s": statistics.median(r["solve_cpu_s"] for r in rs),
                "max_solve_cpu_s": max(r["solve_cpu_s"] for r in rs),
                "max_gap": max(r["gap"] for r in rs),
            }
        )
    for sc in sorted({r.get("scale", 1.0) for r in rows if r.get("bench") == "place-mixes"}):
        out.extend(_mixes_summary(rows, solver, sc))
    return _tables_and_measure_summary(rows, out)


def _mixes_summary(rows, solver, sc) -> list[dict]:
    """LOPT vs HOT-column vs HOT-table over the 5 s runs at one size scale."""
    import statistics

    out = []
    solver = [r for r in solver if r.get("scale", 1.0) == sc]
    mixes_rows = [
        r
        for r in rows
        if r.get("bench") == "place-mixes"
        and r["time_limit_s"] == 5.0
        and r["lagrange_max"] == 1
        and r.get("scale", 1.0) == sc
        and r.get("decompose", "auto") == "auto"
    ]
    if mixes_rows:
        by: dict[tuple, dict] = {}
        for r in mixes_rows:
            by.setdefault(tuple(sorted(r["mix"].items())), {})[r["strategy"]] = r
        full = [m for m, v in by.items() if all("predicted_s" in x for x in v.values())]
        lopt = [v["lopt"] for v in by.values() if "predicted_s" in v.get("lopt", {})]
        row = {
            "bench": "place-mixes-summary",
            "scale": sc,
            "mixes": len(by),
            "mixes_all_placed": len(full),
        }
        ran = {x for v in by.values() for x in v}
        for sname in ("lopt", "hot-column", "hot-table"):
            if sname not in ran:
                continue
            key = sname.replace("-", "_")
            row[f"{key}_sum_s"] = sum(by[m][sname]["predicted_s"] for m in full)
            row[f"{key}_placed"] = sum(1 for v in by.values() if "predicted_s" in v.get(sname, {}))
        row["hot_column_over_lopt"] = row["hot_column_sum_s"] / row["lopt_sum_s"]
        both = [
            m
            for m, v in by.items()
            if all("predicted_s" in v.get(x, {}) for x in ("lopt", "hot-column"))
        ]
        row["mixes_lopt_and_hot_column"] = len(both)
        row["hot_column_over_lopt_all"] = sum(
            by[m]["hot-column"]["predicted_s"] for m in both
        ) / sum(by[m]["lopt"]["predicted_s"] for m in both)
        if "hot_table_sum_s" in row:
            row["hot_table_over_lopt"] = row["hot_table_sum_s"] / row["lopt_sum_s"]
        # LOPT's best placement per mix over every time limit run (longer limits close gaps)
        best: dict[tuple, float] = {}
        for r in solver:
            if "predicted_s" in r:
                m = tuple(sorted(r["mix"].items()))
                best[m] = min(best.get(m, float("inf")), r["predicted_s"])
        if all(m in best for m in both):
            row["hot_column_over_best_lopt_all"] = sum(
                by[m]["hot-column"]["predicted_s"] for m in both
            ) / sum(best[m] for m in both)
        row["lopt_optimal"] = sum(1 for r in lopt if r["status"] == "optimal")
        row["lopt_max_solve_s"] = max(r["solve_s"] for r in lopt)
        row["lopt_median_solve_s"] = statistics.median(r["solve_s"] for r in lopt)
        row["lopt_max_gap"] = max(r["gap"] for r in lopt)
        out.append(row)
    return out


def _tables_and_measure_summary(rows: list[dict], out: list[dict]) -> list[dict]:
    """Appends the table-granular and the measured summaries to ``out``."""
    import statistics

    tab = [r for r in rows if r.get("bench") == "place-tables"]
    par = [r for r in rows if r.get("bench") == "place-pareto"]
    if tab and par:
        tfront = _front([(r["cost_ct"], r["predicted_s"]) for r in tab])
        lfront = _front([(r["cost_ct"], r["predicted_s"]) for r in par])
        ratios = []
        for c, t in tfront:
            need = [lc for lc, lt in lfront if lt <= t * (1 + 1e-9)]
            if need:
                ratios.append(min(need) / c)
        out.append(
            {
                "bench": "place-tables-summary",
                "table_front_points": len(tfront),
                "lopt_cost_over_table_cost_min": min(ratios) if ratios else None,
                "lopt_cost_over_table_cost_median": statistics.median(ratios) if ratios else None,
                "pareto_points": len(par),
            }
        )
    meas = [r for r in rows if r.get("bench") == "place-measure"]
    for sp, f, pl in sorted(
        {(r["speed"], r["budget_frac"], r.get("pipeline", False)) for r in meas}
    ):
        rs = [
            r
            for r in meas
            if r["budget_frac"] == f and r["speed"] == sp and r.get("pipeline", False) == pl
        ]
        out.append(
            {
                "bench": "place-measure-summary",
                "speed": sp,
                "budget_frac": f,
                "mode": rs[0]["mode"],
                "queries": len(rs),
                "median_abs_error": statistics.median(abs(r["error"]) for r in rs),
                "median_abs_io_error": statistics.median(
                    abs(r.get("predicted_io_s", r["predicted_s"]) - r["io_s"]) / r["io_s"]
                    for r in rs
                ),
                "median_abs_model_only_error": statistics.median(
                    abs(r.get("predicted_io_s", r["predicted_s"]) - r["measured_s"])
                    / r["measured_s"]
                    for r in rs
                ),
                "retriever": "pipelined" if rs[0].get("pipeline") else "sequential",
                "engine_term": "exec_term_s" in rs[0],
                "run_error": sum(r["predicted_s"] for r in rs) / sum(r["measured_s"] for r in rs)
                - 1,
                "engine_share": sum(r["engine_s"] for r in rs) / sum(r["measured_s"] for r in rs),
                "measured_sum_s": sum(r["measured_s"] for r in rs),
                "predicted_io_sum_s": sum(r.get("predicted_io_s", r["predicted_s"]) for r in rs),
            }
        )
    return out


def _plot(rows: list[dict], out: str) -> int:
    """Writes the Pareto curve (budget vs predicted time) and per-query bars (measured vs
    predicted) as PNGs with the prefix ``out`` (an existing directory or a path ending in ``/``
    means the prefix ``mosaic`` in it)."""
    import os

    if out.endswith("/") or os.path.isdir(out):
        os.makedirs(out, exist_ok=True)
        out = os.path.join(out, "mosaic")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    par = sorted((r for r in rows if r.get("bench") == "place-pareto"), key=lambda r: r["cost_ct"])
    mixes_rows = [r for r in rows if r.get("bench") == "place-mixes" and "predicted_s" in r]
    if par:
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot(
            [r["cost_ct"] for r in par],
            [r["predicted_s"] for r in par],
            "o-",
            label="LOPT, budget mode",
        )
        lo = [r for r in mixes_rows if r["strategy"] == "lopt"]
        ax.scatter(
            [r["cost_ct"] for r in lo],
            [r["predicted_s"] for r in lo],
            marker="^",
            alpha=0.5,
            label="LOPT, capacity mode (56 mixes)",
        )
        tab = [r for r in rows if r.get("bench") == "place-tables"]
        ax.scatter(
            [r["cost_ct"] for r in tab],
            [r["predicted_s"] for r in tab],
            marker="s",
            s=12,
            alpha=0.5,
            label="table-granular (4 largest tables)",
        )
        ht = [r for r in mixes_rows if r["strategy"] == "hot-table"]
        ax.scatter(
            [r["cost_ct"] for r in ht],
            [r["predicted_s"] for r in ht],
            marker="x",
            alpha=0.5,
            label="HOT-table (mixes)",
        )
        ax.set_xlabel("cost (ct)")
        ax.set_ylabel("predicted TPC-H run (s)")
        ax.set_title("Budget vs predicted time (TPC-H SF1, Table 2.1 devices)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(f"{out}-pareto.png", dpi=100)
    meas = [r for r in rows if r.get("bench") == "place-measure"]
    for sp, f, pl in sorted(
        {(r["speed"], r["budget_frac"], r.get("pipeline", False)) for r in meas}
    ):
        rs = [
            r
            for r in meas
            if r["budget_frac"] == f and r["speed"] == sp and r.get("pipeline", False) == pl
        ]
        fig, ax = plt.subplots(figsize=(9, 3.5))
        xs = range(len(rs))
        ax.bar([x - 0.2 for x in xs], [r["predicted_s"] for r in rs], 0.4, label="predicted")
        if any("exec_term_s" in r for r in rs):
            ax.scatter(
                [x - 0.2 for x in xs],
                [r.get("predicted_io_s", r["predicted_s"]) for r in rs],
                marker="_",
                s=120,
                color="black",
                label="predicted: model I/O alone",
                zorder=3,
            )
        ax.bar([x + 0.2 for x in xs], [r["io_s"] for r in rs], 0.4, label="measured: retrieval")
        ax.bar(
            [x + 0.2 for x in xs],
            [r["engine_s"] for r in rs],
            0.4,
            bottom=[r["io_s"] for r in rs],
            label="measured: engine (after the last read)",
        )
        ax.set_xticks(list(xs), [r["query"] for r in rs], rotation=90)
        ax.set_ylabel("s")
        ax.set_title(
            f"Measured vs predicted per query ({rs[0]['mode']}, "
            f"{'pipelined' if pl else 'sequential'}, speed {sp}, budget {f})"
        )
        ax.legend()
        fig.tight_layout()
        kind = "pipelined" if pl else "sequential"
        fig.savefig(f"{out}-queries-{kind}-{sp}-{f}.png", dpi=100)
    return 0


#: ``--decompose`` -> LOPT's ``decompose`` argument (None: its default for the mode)
_DECOMPOSE = {"auto": None, "on": True, "off": False}


def main(argv: list[str]) -> int:
    from attune.bench import machine
    from attune.placement import store as st
    from attune.placement import strategies as sg
    from attune.placement import trace as tr
    from attune.placement.devices import load_devices
    from attune.placement.model import Workload

    p = argparse.ArgumentParser(prog="attune bench place")
    p.add_argument("mode", choices=("mixes", "pareto", "tables", "measure", "summary", "plot"))
    p.add_argument("--from", dest="src", help="summary/plot: results file(s), comma-separated")
    p.add_argument("--store", help="column store (sizes from its files); mixes and pareto")
    p.add_argument("--data", help="measure: directory of TPC-H Parquet tables (tpchgen-cli)")
    p.add_argument("--workdir", default="/tmp/attune-place-emu", help="measure: scratch dir")
    p.add_argument(
        "--emulation",
        choices=("auto", "kernel", "inprocess"),
        default="auto",
        help="measure: loop devices throttled by blkio (kernel), or an in-process throttle",
    )
    p.add_argument("--speed", type=float, default=0.05, help="measure: device speed factor")
    p.add_argument(
        "--budgets",
        default="0.1,0.3,0.6",
        help="measure: LOPT budgets as fractions from the cheapest to the all-fastest cost",
    )
    p.add_argument("--repeats", type=int, default=1, help="measure: runs per query (mean)")
    p.add_argument("--catalogue", help="measure: write the calibrated device file here")
    p.add_argument(
        "--engine",
        choices=("arrow", "views"),
        default="arrow",
        help="measure: DuckDB over Arrow tables from the retriever, or over the store's views",
    )
    p.add_argument(
        "--retriever",
        choices=("pipelined", "sequential"),
        default="pipelined",
        help="measure: decode each column while the others are read, or after all reads",
    )
    p.add_argument(
        "--engine-term",
        choices=("calibrated", "none"),
        default="calibrated",
        help="measure: add each query's engine time, measured once on the loaded placement "
        "(every column on the cheapest device, never scored), to the model's prediction",
    )
    p.add_argument("--devices", help="device file (default: Table 2.1)")
    p.add_argument("--time-limit", type=float, default=5.0)
    p.add_argument(
        "--lagrange-iterations",
        type=int,
        default=1,
        help="mixes/pareto: LOPT's Lagrangian iterations (1: the tables' own bounds only)",
    )
    p.add_argument(
        "--decompose",
        choices=("auto", "on", "off"),
        default="auto",
        help="mixes/pareto: LOPT's per-table stage (auto: on in budget mode or with Lagrangian "
        "iterations, off in capacity mode)",
    )
    p.add_argument("--slack", type=float, default=0.02, help="capacity slack per device in mixes")
    p.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="mixes/pareto/tables: multiply every column's size (models a larger scale factor)",
    )
    p.add_argument("--points", type=int, default=12)
    p.add_argument("--limit", type=int, default=None, help="first N mixes only")
    p.add_argument(
        "--strategies",
        default="lopt,hot-column,hot-table",
        help="mixes: comma-separated strategies",
    )
    p.add_argument("--out", required=True, help="append rows to this JSON-lines file")
    a = p.parse_args(argv)
    if a.mode == "measure":
        return _measure(a, argv)
    if a.mode in ("summary", "plot"):
        if not a.src:
            raise InvalidArgumentError(f"{a.mode} needs --from")
        from pathlib import Path

        rows = [
            json.loads(x)
            for f in a.src.split(",")
            for x in Path(f).read_text(encoding="utf-8").splitlines()
            if x.strip()
        ]
        if a.mode == "plot":
            return _plot(rows, a.out)
        out = summarize(rows)
        cmd = "attune bench place " + " ".join(argv)
        with open(a.out, "a", encoding="utf-8") as fh:
            for row in out:
                row.update(command=cmd, machine=machine_())
                fh.write(json.dumps(row) + "\n")
        return 0
    if not a.store:
        raise InvalidArgumentError(f"{a.mode} needs --store")
    s = st.open_store(a.store)
    devs = load_devices(a.devices)
    cols = s.model_columns()
    if a.scale != 1.0:
        from attune.placement.model import Column

        if a.scale <= 0:
            raise InvalidArgumentError(f"--scale must be positive, got {a.scale}")
        cols = {
            k: Column(
                c.table, c.name, c.raw_bytes * a.scale, {x: v * a.scale for x, v in c.sizes.items()}
            )
            for k, c in cols.items()
        }
    w = Workload(cols, tr.extract_workload(tr.tpch_queries(), tr.TPCH_SCHEMA))
    total = w.total_bytes()
    mach = machine()
    cmd = "attune bench place " + " ".join(argv)
    rows = []
    if a.mode == "mixes":
        for i, mix in enumerate(mixes()):
            if a.limit is not None and i >= a.limit:
                break
            caps = [total * f / 100 * (1 + a.slack) if f else 0.0 for f in mix]
            dd = [d.with_capacity(c) for d, c in zip(devs, caps)]
            for strat in a.strategies.split(","):
                try:
                    kw = (
                        {
                            "time_limit_s": a.time_limit,
                            "lagrange_iterations": a.lagrange_iterations,
                            "decompose": _DECOMPOSE[a.decompose],
                        }
                        if strat == "lopt"
                        else {}
                    )
                    r = sg.solve(w, dd, strat, **kw)
                    row = r.to_dict()
                    row.pop("placement")
                except InvalidArgumentError as e:
                    row = {"strategy": strat, "error": str(e)}
                row.update(
                    mix={d.name: f for d, f in zip(devs, mix)},
                    bench="place-mixes",
                    time_limit_s=a.time_limit,
                    lagrange_max=a.lagrange_iterations,
                    scale=a.scale,
                    decompose=a.decompose,
                )
                rows.append(row)
                print(
                    f"{mix} {strat:10} {row.get('predicted_s', float('nan')):.3f} s "
                    f"{row.get('status', row.get('error'))}",
                    file=sys.stderr,
                )
    elif a.mode == "tables":
        rows.extend(table_granular(w, devs))
    else:
        for r in sg.pareto(
            w,
            devs,
            points=a.points,
            time_limit_s=a.time_limit,
            lagrange_iterations=a.lagrange_iterations,
            decompose=_DECOMPOSE[a.decompose],
        ):
            row = r.to_dict()
            row.pop("placement")
            row["bench"] = "place-pareto"
            rows.append(row)
    with open(a.out, "a", encoding="utf-8") as f:
        for row in rows:
            row.update(command=cmd, machine=mach, total_bytes=total)
            f.write(json.dumps(row) + "\n")
    return 0


def _measure(a, argv) -> int:
    """Calibrates emulated devices, loads the tables onto them, and for each budget places the
    columns with budget-mode LOPT (calibrated catalogue), migrates, and measures every query."""
    from dataclasses import replace
    from pathlib import Path

    from attune.bench import machine
    from attune.placement import emulate as em
    from attune.placement import measure as me
    from attune.placement import store as st
    from attune.placement import strategies as sg
    from attune.placement import trace as tr
    from attune.placement.devices import devices_to_toml, load_devices
    from attune.placement.model import Workload

    if not a.data:
        raise InvalidArgumentError("measure needs --data (a directory of TPC-H Parquet files)")
    tables = {p.stem: str(p) for p in sorted(Path(a.data).glob("*.parquet"))}
    if set(tables) != set(tr.TPCH_SCHEMA):
        raise InvalidArgumentError(
            f"{a.data}: expected the 8 TPC-H tables as NAME.parquet, found {sorted(tables)}"
        )
    fracs = [float(x) for x in a.budgets.split(",") if x.strip()]
    devs = load_devices(a.devices)
    raw = sum(Path(p).stat().st_size for p in tables.values())
    mach = machine()
    cmd = "attune bench place " + " ".join(argv)
    sql = tr.tpch_queries()
    rows = []
    work = Path(a.workdir)
    with em.Emulator(
        devs, work, mode=a.emulation, speed=a.speed, image_bytes=2 * raw + (256 << 20)
    ) as emu:
        print(
            f"emulation: {emu.mode}" + (f" ({emu.reason})" if emu.reason else ""), file=sys.stderr
        )
        cal = em.calibrate(emu)
        mounted = {d.name: d.mount for d in emu.mounted_devices()}
        cal = [replace(d, mount=mounted[d.name]) for d in cal]
        if a.catalogue:
            Path(a.catalogue).write_text(devices_to_toml(cal), encoding="utf-8")
        for d in cal:
            rows.append(
                {
                    "bench": "place-calibration",
                    "device": d.name,
                    "mode": emu.mode,
                    "emulated_bps": d.throughput * a.speed,
                    "measured_bps": d.measured[d.codec],
                    "seek_s": d.seek_s,
                }
            )
        import shutil

        # the store's files live on the emulated devices, gone after the run: a fresh manifest
        shutil.rmtree(work / "store", ignore_errors=True)
        store = st.create_store(work / "store", tables, cal)
        w = Workload(store.model_columns(), tr.extract_workload(sql, tr.TPCH_SCHEMA))
        terms = None
        if a.engine_term == "calibrated":
            # on the loaded placement (every column on the cheapest device), which no budget
            # below places: the term is never fitted on a placement it is scored on
            terms = me.engine_terms(store, w, sql)
            for q, t in terms.items():
                rows.append(
                    {
                        "bench": "place-engine-calibration",
                        "query": q,
                        **t,
                        "placement": "loaded (cheapest device)",
                    }
                )
        lo = sg.min_cost(w, cal)
        hi = max(sum(c.size_on(d) * d.cost_per_byte() for c in w.columns.values()) for d in cal)
        for f in fracs:
            budget = lo + (hi - lo) * f
            r = sg.lopt(w, cal, mode="budget", budget_ct=budget, time_limit_s=a.time_limit)
            st.migrate(store, r.placement, cal)
            w = Workload(store.model_columns(), w.queries)
            runs = me.run_queries(
                emu,
                store,
                w,
                sql,
                cal,
                repeats=a.repeats,
                engine=a.engine,
                pipeline=a.retriever == "pipelined",
                terms=terms,
            )
            for q in runs:
                rows.append(
                    {
                        "bench": "place-measure",
                        "mode": emu.mode,
                        "budget_frac": f,
                        "budget_ct": budget,
                        "cost_ct": r.cost_ct,
                        "speed": a.speed,
                        **q,
                    }
                )
                print(
                    f"budget {f:.2f} {q['query']} predicted {q['predicted_s']:.3f} s "
                    f"measured {q['measured_s']:.3f} s",
                    file=sys.stderr,
                )
    with open(a.out, "a", encoding="utf-8") as fh:
        for row in rows:
            row.update(command=cmd, machine=mach)
            fh.write(json.dumps(row) + "\n")
    return 0
