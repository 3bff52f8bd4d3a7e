"""Placement strategies: HOT-table, HOT-column and LOPT (a MIP solved with HiGHS).

Every strategy returns a :class:`Result`: the placement (column key -> device), its predicted
time (Equation 2.4) and cost (2.5), and for LOPT the solver's status, gap and time.

LOPT (source §2.4.5) as solved here: binaries ``x[c,d]`` (column c on device d), one ``z_T >= 0``
per distinct scan T, and

* minimise ``sum_T n_T z_T`` (n_T the scan's multiplicity) + ``eps * sum_{c,d} cost(c,d) x[c,d]``;
* ``sum_d x[c,d] = 1`` for every column (2.6a/b);
* ``z_T >= sum_{c in T} t_{d,c} x[c,d]`` for every device d: the max of (2.3), linearised;
* capacity mode: ``sum_c size(c,d) x[c,d] <= capacity(d)`` (2.7);
  budget mode: ``sum_{c,d} cost(c,d) x[c,d] <= budget`` (2.8);
* no-regression (optional): every query's ``sum_{T in q} z_T`` at most its time under a given
  current placement.

The ``eps`` term is the secondary objective: among placements of equal time, the cheaper one,
so columns no scan reads go to the cheapest device with room. It is scaled so that it can never
outweigh a relative time difference of 1e-7.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import sys
import time
from dataclasses import dataclass, field

from attune.errors import InvalidArgumentError
from attune.placement.devices import Device
from attune.placement.model import (
    Placement,
    Scan,
    Workload,
    column_time,
    cost,
    scan_time,
    throughput,
    total_time,
    used_bytes,
)

STRATEGIES = ("lopt", "hot-column", "hot-table")


@contextlib.contextmanager
def _quiet_stdout():
    """HiGHS prints its banner on the C stdout whatever its options; keep --json output clean."""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


@dataclass
class Result:
    strategy: str
    mode: str
    placement: Placement
    predicted_s: float
    cost_ct: float
    used_bytes: dict[str, float]
    solve_s: float = 0.0
    status: str = "optimal"
    gap: float = 0.0
    distinct_scans: int = 0
    sampled_scans: int = 0
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "strategy": self.strategy,
            "mode": self.mode,
            "predicted_s": self.predicted_s,
            "cost_ct": self.cost_ct,
            "used_bytes": self.used_bytes,
            "solve_s": self.solve_s,
            "status": self.status,
            "gap": self.gap,
            "distinct_scans": self.distinct_scans,
            "sampled_scans": self.sampled_scans,
            "placement": self.placement,
            **self.extra,
        }


def _result(strategy, mode, w, devices, placement, **kw) -> Result:
    return Result(
        strategy=strategy,
        mode=mode,
        placement=placement,
        predicted_s=total_time(w, devices, placement),
        cost_ct=cost(w, devices, placement),
        used_bytes=used_bytes(w, devices, placement),
        **kw,
    )


def _need_capacities(devices: list[Device], strategy: str) -> None:
    missing = [d.name for d in devices if d.capacity is None]
    if missing:
        raise InvalidArgumentError(
            f"{strategy} in capacity mode needs a capacity for every device; missing for "
            f"{', '.join(missing)}"
        )


def _fastest_first(devices: list[Device]) -> list[Device]:
    return sorted(devices, key=lambda d: (-throughput(d), d.cost_ct_per_gb, d.name))


def _capacity_error(what: str, size: float, free: dict[str, float]) -> InvalidArgumentError:
    room = ", ".join(f"{n} {v / 1e6:.1f} MB" for n, v in free.items())
    return InvalidArgumentError(
        f"infeasible: {what} ({size / 1e6:.1f} MB) fits on no device (free: {room})"
    )


def _check_room(workload: Workload, devices: list[Device]) -> None:
    """Clear errors for capacities nothing can fit: a column larger than every device, or
    columns that together need more than all devices hold."""
    cap = {d.name: float(d.capacity or 0.0) for d in devices}
    need = 0.0
    for k, c in sorted(workload.columns.items()):
        if all(c.size_on(d) > cap[d.name] for d in devices):
            raise InvalidArgumentError(
                f"infeasible capacities: column {k} ({c.size_on(devices[0]) / 1e6:.1f} MB) "
                "fits on no device"
            )
        need += min(c.size_on(d) for d in devices)
    if need > sum(cap.values()) * (1 + 1e-9):
        raise InvalidArgumentError(
            f"infeasible capacities: the columns need at least {need / 1e6:.1f} MB, the devices "
            f"hold {sum(cap.values()) / 1e6:.1f} MB"
        )


def hot_table(workload: Workload, devices: list[Device], *, repair: bool = True) -> Result:
    """Tables by accesses (descending) onto the fastest device with room for the whole table.

    A table that fits on no device whole is placed column by column, largest column first, on
    the fastest device with room (the source does not say what its HOT-table does then).

    With ``repair``, when that greedy gets stuck (a late column fits nowhere), the strategy
    starts over and gives each table, in the same order, the fastest device with room for it
    whole that still lets every later column pack (first-fit decreasing), and splits a table
    only when no device can take it whole that way, each of its columns then taking the
    fastest device that keeps the rest packable (as HOT-column's repair does)."""
    _need_capacities(devices, "hot-table")
    try:
        return _hot_table_greedy(workload, devices)
    except InvalidArgumentError:
        if not repair:
            raise
    return _hot_table_repaired(workload, devices)


def _table_order(workload: Workload, devices: list[Device]):
    acc: dict[str, int] = {t: 0 for t in workload.tables()}
    for s, n in workload.distinct_scans().items():
        acc[s.table] += n
    tables = workload.tables()
    size_t = {
        t: {d.name: sum(workload.columns[k].size_on(d) for k in keys) for d in devices}
        for t, keys in tables.items()
    }
    order = sorted(tables, key=lambda t: (-acc[t], -size_t[t][devices[0].name], t))
    return tables, size_t, order


def _hot_table_repaired(workload: Workload, devices: list[Device]) -> Result:
    tables, size_t, order = _table_order(workload, devices)
    free = {d.name: float(d.capacity or 0.0) for d in devices}
    placement: Placement = {}
    split = []
    for i, t in enumerate(order):
        rest = [k for u in order[i + 1 :] for k in tables[u]]
        for d in _fastest_first(devices):
            if size_t[t][d.name] <= free[d.name]:
                free[d.name] -= size_t[t][d.name]
                if _packs(workload, devices, free, rest):
                    for k in tables[t]:
                        placement[k] = d.name
                    break
                free[d.name] += size_t[t][d.name]
        else:
            split.append(t)
            cols = sorted(tables[t], key=lambda k: -workload.columns[k].raw_bytes)
            for j, k in enumerate(cols):
                _place_leaving_room(workload, devices, free, placement, k, cols[j + 1 :] + rest)
    return _result(
        "hot-table",
        "capacity",
        workload,
        devices,
        placement,
        extra={"split_tables": split, "repaired": True},
    )


def _hot_table_greedy(workload: Workload, devices: list[Device]) -> Result:
    _need_capacities(devices, "hot-table")
    free = {d.name: float(d.capacity or 0.0) for d in devices}
    tables, size_t, order = _table_order(workload, devices)
    placement: Placement = {}
    split = []
    for t in order:
        for d in _fastest_first(devices):
            if size_t[t][d.name] <= free[d.name]:
                free[d.name] -= size_t[t][d.name]
                for k in tables[t]:
                    placement[k] = d.name
                break
        else:
            split.append(t)
            for k in sorted(tables[t], key=lambda k: -workload.columns[k].raw_bytes):
                _place_on_fastest(workload, devices, free, placement, k)
    return _result(
        "hot-table", "capacity", workload, devices, placement, extra={"split_tables": split}
    )


def _place_on_fastest(w, devices, free, placement, k) -> None:
    col = w.columns[k]
    for d in _fastest_first(devices):
        if col.size_on(d) <= free[d.name]:
            free[d.name] -= col.size_on(d)
            placement[k] = d.name
            return
    raise _capacity_error(f"column {k}", col.size_on(devices[0]), free)


def _place_leaving_room(w, devices, free, placement, k, later) -> None:
    """Places column ``k`` on the fastest device that still leaves room for the columns
    ``later`` (by :func:`_packs`)."""
    col = w.columns[k]
    for d in _fastest_first(devices):
        sz = col.size_on(d)
        if sz <= free[d.name]:
            free[d.name] -= sz
            if _packs(w, devices, free, later):
                placement[k] = d.name
                return
            free[d.name] += sz
    raise _capacity_error(f"column {k}", col.size_on(devices[0]), free)


def _packs(workload, devices, free: dict[str, float], keys) -> bool:
    """Whether ``keys`` fit in ``free`` by first-fit decreasing (a sufficient test)."""
    room = dict(free)
    for k in sorted(keys, key=lambda k: -workload.columns[k].raw_bytes):
        for d in devices:
            sz = workload.columns[k].size_on(d)
            if sz <= room[d.name]:
                room[d.name] -= sz
                break
        else:
            return False
    return True


def hot_column(workload: Workload, devices: list[Device], *, repair: bool = True) -> Result:
    """Columns by accesses (descending; ties: larger first, which packs better) onto the fastest
    device with room.

    Whole columns on devices sized to the data leave the greedy stuck when a late (cold, large)
    column fits in no device's remainder. With ``repair`` the strategy then starts over and
    takes, for each column, the fastest device with room that still lets the remaining columns
    pack (first-fit decreasing); the source does not say what its HOT does then."""
    _need_capacities(devices, "hot-column")
    acc = workload.access_counts()
    order = sorted(workload.columns, key=lambda k: (-acc[k], -workload.columns[k].raw_bytes, k))
    try:
        free = {d.name: float(d.capacity or 0.0) for d in devices}
        placement: Placement = {}
        for k in order:
            _place_on_fastest(workload, devices, free, placement, k)
        return _result("hot-column", "capacity", workload, devices, placement)
    except InvalidArgumentError:
        if not repair:
            raise
    free = {d.name: float(d.capacity or 0.0) for d in devices}
    placement = {}
    for i, k in enumerate(order):
        _place_leaving_room(workload, devices, free, placement, k, order[i + 1 :])
    return _result("hot-column", "capacity", workload, devices, placement, extra={"repaired": True})


def min_cost(workload: Workload, devices: list[Device]) -> float:
    """The cheapest placement's cost (every column on its cheapest device), in cents."""
    return sum(
        min(c.size_on(d) * d.cost_per_byte() for d in devices) for c in workload.columns.values()
    )


def lopt(
    workload: Workload,
    devices: list[Device],
    *,
    mode: str = "capacity",
    budget_ct: float | None = None,
    no_regression: Placement | None = None,
    sample: float = 1.0,
    seed: int = 0,
    time_limit_s: float = 5.0,
    mip_gap: float = 1e-4,
    secondary: bool | str = True,
    threads: int = 1,
    cuts: bool = True,
    warm_start: bool = True,
    decompose: bool | None = None,
    start: Placement | None = None,
    lagrange_iterations: int = 1,
    lagrange_share: float = 0.5,
    highs_options: dict | None = None,
    relax_untouched: bool | None = None,
) -> Result:
    """The optimal placement under the model (see the module docstring).

    ``decompose``: first solve each table alone (the scans of one table only involve its
    columns; tables share only the capacities or the budget). Each table's optimum is a lower
    bound on its share of the objective, added as a constraint; when the tables' placements
    together fit, they are the optimum and the full MIP is skipped. Default (None): on in
    budget mode and with ``lagrange_iterations`` > 1, off in capacity mode, where the tables
    compete for the fast devices, their placements never fit together on the TPC-H mixes,
    and the full MIP proves optimality in less CPU time without the tables' bound rows. ``lagrange_iterations`` >
    1 goes on to price the shared capacities (or budget) by subgradient ascent
    (:func:`_lagrange`, at most ``lagrange_share`` of the time limit): a stronger bound, each
    iteration one small MIP per table. ``relax_untouched`` (default: in budget mode) makes the
    columns no scan reads continuous in the MIP and places them whole afterwards, exactly
    (budget mode: each on its cheapest device) or, in capacity mode, when they pack into the
    room left (otherwise the MIP is solved again with them whole). ``highs_options`` are set
    on every HiGHS model. ``warm_start`` starts the
    full MIP from HOT-column (capacity mode) or the cheapest placement (budget mode).
    ``secondary`` True: the cost post-pass :func:`cheapen`; ``"objective"``: an ``eps * cost``
    term in the objective (slower to prove optimal); False: neither."""
    if mode not in ("capacity", "budget"):
        raise InvalidArgumentError(f"mode must be 'capacity' or 'budget', got {mode!r}")
    if mode == "capacity":
        _need_capacities(devices, "lopt")
        _check_room(workload, devices)
    else:
        if budget_ct is None:
            raise InvalidArgumentError("budget mode needs a budget (cents)")
        floor = min_cost(workload, devices)
        if budget_ct < floor - 1e-9:
            raise InvalidArgumentError(
                f"infeasible budget: {budget_ct:.2f} ct is below the cheapest placement "
                f"({floor:.2f} ct, every column on its cheapest device)"
            )
    if not 0.0 < sample <= 1.0:
        raise InvalidArgumentError(f"sample must be in (0, 1], got {sample}")
    if no_regression is not None:
        from attune.placement.model import check_placement

        check_placement(workload, devices, no_regression)

    scans = workload.distinct_scans()
    scan_list = sorted(scans, key=lambda s: (s.table, s.columns))
    if sample < 1.0:
        rng = random.Random(seed)
        keep = max(1, round(sample * len(scan_list)))
        scan_list = sorted(rng.sample(scan_list, keep), key=lambda s: (s.table, s.columns))
    counts = {s: float(scans[s]) for s in scan_list}
    deadline = time.perf_counter() + float(time_limit_s)
    t0 = time.perf_counter()
    c0 = time.process_time()
    opts = {
        "mip_gap": mip_gap,
        "threads": threads,
        "cuts": cuts,
        "secondary": secondary,
        "highs_options": highs_options,
    }
    if relax_untouched is None:
        relax_untouched = mode == "budget"
    if decompose is None:
        decompose = mode == "budget" or lagrange_iterations > 1
    full_opts = {**opts, "relax_untouched": relax_untouched}

    # 1. the tables alone, then with the shared capacities (or budget) priced: lower bounds
    #    per table, and often the optimum
    by = {d.name: d for d in devices}
    given, start = start, None
    if warm_start:
        start = _start_placement(workload, devices, mode, budget_ct)
        if (
            given is not None
            and _fits(workload, devices, given, mode, budget_ct)
            and (
                start is None
                or sum(n * scan_time(s, workload, by, given) for s, n in counts.items())
                < sum(n * scan_time(s, workload, by, start) for s, n in counts.items())
            )
        ):
            start = given
    tables = workload.tables()
    priced: list[tuple[list[Scan], list[float], float]] = []
    lag_info: dict = {}
    if decompose and len(tables) > 1:
        upper = (
            sum(n * scan_time(s, workload, by, start) for s, n in counts.items())
            if start is not None
            else float("inf")
        )
        if not math.isfinite(upper):
            # no feasible start: the slowest single-device time as the step's target
            upper = sum(
                n
                * max(
                    sum(column_time(workload.columns[k], d) for k in s.column_keys())
                    for d in devices
                )
                for s, n in counts.items()
            )
        lag = _lagrange(
            workload,
            devices,
            counts,
            mode=mode,
            budget_ct=budget_ct,
            upper=upper,
            deadline=t0 + lagrange_share * float(time_limit_s),
            iterations=lagrange_iterations,
            opts=full_opts,
        )
        lag_info = {
            "lagrange_bound_s": lag["bound"],
            "lagrange_iterations": lag["iterations"],
        }
        priced = lag["cuts"] + (lag["cuts0"] if lag["lam"] != [0.0] * len(lag["lam"]) else [])
        if lag["placement"] is not None:
            if start is None or lag["time"] < upper:
                start = lag["placement"]
            if (
                no_regression is None
                and lag["time"] - lag["bound"] <= mip_gap * lag["time"]
                and len(scan_list) == len(scans)
            ):
                return _lopt_result(
                    workload,
                    devices,
                    lag["placement"],
                    mode,
                    budget_ct,
                    secondary,
                    time.perf_counter() - t0,
                    "optimal",
                    lag["bound"],
                    scans,
                    scan_list,
                    {
                        "decomposed": True,
                        "nodes": 0,
                        "warm_start": False,
                        "solve_cpu_s": time.process_time() - c0,
                        **lag_info,
                    },
                )
    if not warm_start:
        start = None

    # 2. the full MIP, with the Lagrangian cuts and a start
    nr_rows = None
    if no_regression is not None:
        by = {d.name: d for d in devices}
        nr_rows = []
        for qscans in workload.queries.values():
            bound = sum(scan_time(s, workload, by, no_regression) for s in qscans)
            nr_rows.append(([s for s in qscans if s in counts], bound))
    r = _mip(
        workload,
        devices,
        sorted(workload.columns),
        counts,
        mode=mode,
        budget=budget_ct,
        time_limit=max(0.05, deadline - time.perf_counter()),
        start=start,
        nr_rows=nr_rows,
        priced_bounds=priced,
        **full_opts,
    )
    if relax_untouched and r["placement"] is None and not r["infeasible"]:
        # the unread columns did not pack into the room left: solve with them whole
        r = _mip(
            workload,
            devices,
            sorted(workload.columns),
            counts,
            mode=mode,
            budget=budget_ct,
            time_limit=max(0.05, deadline - time.perf_counter()),
            start=start,
            nr_rows=nr_rows,
            priced_bounds=priced,
            **opts,
        )
    if r["infeasible"]:
        what = "capacities" if mode == "capacity" else f"budget {budget_ct:.2f} ct"
        extra = " with the no-regression constraint" if no_regression is not None else ""
        raise InvalidArgumentError(f"infeasible: no placement fits the {what}{extra}")
    if r["placement"] is None:
        raise InvalidArgumentError(
            f"lopt: the solver found no placement within {time_limit_s} s (status {r['status']})"
        )
    return _lopt_result(
        workload,
        devices,
        r["placement"],
        mode,
        budget_ct,
        secondary,
        time.perf_counter() - t0,
        r["status"],
        r["bound"],
        scans,
        scan_list,
        {
            "decomposed": False,
            "nodes": r["nodes"],
            "warm_start": start is not None,
            "solve_cpu_s": time.process_time() - c0,
            **lag_info,
        },
    )


def _sub(workload: Workload, keys: list[str]) -> Workload:
    return Workload({k: workload.columns[k] for k in keys}, {})


def _fits(workload, devices, placement, mode, budget_ct) -> bool:
    if mode == "capacity":
        used = used_bytes(workload, devices, placement)
        return all(used[d.name] <= float(d.capacity or 0.0) * (1 + 1e-9) for d in devices)
    return cost(workload, devices, placement) <= float(budget_ct) * (1 + 1e-9)


def _lopt_result(
    w,
    devices,
    placement,
    mode,
    budget_ct,
    secondary,
    solve_s,
    status,
    bound,
    scans,
    scan_list,
    extra,
) -> Result:
    if secondary is True:
        placement = cheapen(w, devices, placement, mode=mode)
    res = _result(
        "lopt",
        mode,
        w,
        devices,
        placement,
        solve_s=solve_s,
        status=status,
        distinct_scans=len(scans),
        sampled_scans=len(scan_list),
        extra={"bound_s": bound, **extra, **({"budget_ct": budget_ct} if mode == "budget" else {})},
    )
    if len(scan_list) == len(scans) and res.predicted_s > 0:
        res.gap = max(0.0, (res.predicted_s - bound) / res.predicted_s)
    return res


def _mip(
    workload: Workload,
    devices: list[Device],
    cols: list[str],
    counts: dict[Scan, float],
    *,
    mode: str,
    budget: float | None,
    time_limit: float,
    mip_gap: float,
    threads: int,
    cuts: bool,
    secondary: bool | str,
    start: Placement | None = None,
    table_bounds: list[tuple[list[Scan], float]] | None = None,
    nr_rows: list[tuple[list[Scan], float]] | None = None,
    prices: list[float] | None = None,
    priced_bounds: list[tuple[list[Scan], list[float], float]] | None = None,
    highs_options: dict | None = None,
    relax_untouched: bool = False,
) -> dict:
    """Builds and solves LOPT over ``cols`` and the scans in ``counts``; see the module doc.

    ``prices``: Lagrangian multipliers added to the objective, per device (capacity mode: per
    byte stored there) or one (budget mode: per cent spent). ``priced_bounds``: rows
    ``sum n_T z_T + sum prices . use(x) >= bound`` over a table's scans and columns (the
    Lagrangian cuts of :func:`_lagrange`)."""
    import highspy

    ci = {k: i for i, k in enumerate(cols)}
    nd = len(devices)
    scan_list = list(counts)
    si = {s: i for i, s in enumerate(scan_list)}
    with _quiet_stdout():
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit))
    h.setOptionValue("mip_rel_gap", float(mip_gap))
    h.setOptionValue("threads", int(threads))
    for name, value in (highs_options or {}).items():
        h.setOptionValue(name, value)
    inf = highspy.kHighsInf

    def xv(c: int, d: int) -> int:
        return c * nd + d

    nx = len(cols) * nd
    costs = [[workload.columns[k].size_on(d) * d.cost_per_byte() for d in devices] for k in cols]
    eps = 0.0
    if secondary == "objective":
        tmax = (
            sum(
                n
                * max(
                    sum(column_time(workload.columns[k], d) for k in s.column_keys())
                    for d in devices
                )
                for s, n in counts.items()
            )
            or 1.0
        )
        eps = 1e-7 * tmax / (sum(max(r) for r in costs) or 1.0)
    use = _usage(workload, devices, cols, mode)
    for i in range(len(cols)):
        for d in range(nd):
            h.addVar(0.0, 1.0)
            price = sum(p * u for p, u in zip(prices, use[i][d])) if prices else 0.0
            h.changeColCost(xv(i, d), eps * costs[i][d] + price)
    for s in scan_list:
        h.addVar(0.0, inf)
        h.changeColCost(nx + si[s], counts[s])
    read = {k for s in scan_list for k in s.column_keys()}
    ints = [
        xv(i, d) for i, k in enumerate(cols) if not relax_untouched or k in read for d in range(nd)
    ]
    if ints:
        h.changeColsIntegrality(len(ints), ints, [highspy.HighsVarType.kInteger] * len(ints))
    for i in range(len(cols)):
        h.addRow(1.0, 1.0, nd, [xv(i, d) for d in range(nd)], [1.0] * nd)
    for s in scan_list:
        keys = s.column_keys()
        for d, dev in enumerate(devices):
            idx = [xv(ci[k], d) for k in keys] + [nx + si[s]]
            val = [column_time(workload.columns[k], dev) for k in keys] + [-1.0]
            h.addRow(-inf, 0.0, len(idx), idx, val)
        if len(keys) > 1 and cuts:
            # valid: a scan lasts at least as long as reading any one of its columns where it is
            for k in keys:
                idx = [xv(ci[k], d) for d in range(nd)] + [nx + si[s]]
                val = [column_time(workload.columns[k], dev) for dev in devices] + [-1.0]
                h.addRow(-inf, 0.0, len(idx), idx, val)
    # the resource rows are scaled to a right-hand side of 1 (bytes and cents are 1e7-1e9
    # against times of 1e-4-10 s: unscaled, HiGHS warns that the model is badly scaled)
    if mode == "capacity":
        for d, dev in enumerate(devices):
            idx = [xv(i, d) for i in range(len(cols))]
            val = [workload.columns[k].size_on(dev) for k in cols]
            cap = float(dev.capacity or 0.0)
            unit = cap if cap > 0 else max(sum(val), 1.0)
            h.addRow(-inf, cap / unit, len(idx), idx, [v / unit for v in val])
    else:
        idx = [xv(i, d) for i in range(len(cols)) for d in range(nd)]
        val = [costs[i][d] for i in range(len(cols)) for d in range(nd)]
        unit = float(budget) if budget > 0 else max(sum(val), 1.0)
        h.addRow(-inf, float(budget) / unit, len(idx), idx, [v / unit for v in val])
    for tscans, lb in table_bounds or []:
        idx = [nx + si[s] for s in tscans]
        h.addRow(lb * (1 - 1e-9), inf, len(idx), idx, [counts[s] for s in tscans])
    for tscans, lam, lb in priced_bounds or []:
        idx = [nx + si[s] for s in tscans]
        val = [counts[s] for s in tscans]
        tcols = {s.table for s in tscans}
        for i, k in enumerate(cols):
            if workload.columns[k].table in tcols:
                for d in range(nd):
                    v = sum(p * u for p, u in zip(lam, use[i][d]))
                    if v:
                        idx.append(xv(i, d))
                        val.append(v)
        h.addRow(lb - 1e-9 * abs(lb), inf, len(idx), idx, val)
    for qscans, bound in nr_rows or []:
        per: dict[int, float] = {}
        for s in qscans:
            per[nx + si[s]] = per.get(nx + si[s], 0.0) + 1.0
        if per:
            h.addRow(-inf, bound * (1 + 1e-9) + 1e-12, len(per), list(per), list(per.values()))
    if start is not None:
        by = {d.name: d for d in devices}
        dn = [d.name for d in devices]
        vals = [0.0] * (nx + len(scan_list))
        for i, k in enumerate(cols):
            vals[xv(i, dn.index(start[k]))] = 1.0
        for s in scan_list:
            vals[nx + si[s]] = scan_time(s, workload, by, start)
        sol = highspy.HighsSolution()
        sol.col_value = vals
        h.setSolution(sol)

    t0 = time.perf_counter()
    with _quiet_stdout():
        h.run()
    solve_s = time.perf_counter() - t0
    status = h.getModelStatus()
    info = h.getInfo()
    out = {
        "status": h.modelStatusToString(status),
        "optimal": status == highspy.HighsModelStatus.kOptimal,
        "infeasible": status
        in (highspy.HighsModelStatus.kInfeasible, highspy.HighsModelStatus.kUnboundedOrInfeasible),
        "placement": None,
        "bound": max(0.0, float(info.mip_dual_bound)),
        "nodes": int(info.mip_node_count),
        "solve_s": solve_s,
    }
    if out["optimal"]:
        out["status"] = "optimal"
    if not out["infeasible"] and info.primal_solution_status == 2:  # kSolutionStatusFeasible
        x = h.getSolution().col_value
        out["placement"] = {
            k: devices[max(range(nd), key=lambda d: x[xv(i, d)])].name for i, k in enumerate(cols)
        }
        if relax_untouched and len(read) < len(cols):
            # columns no scan reads only take room: they were fractional; pack them whole
            out["placement"] = _repack(
                workload, devices, out["placement"], [k for k in cols if k not in read], mode
            )
            if out["placement"] is None:
                out["optimal"] = False
                out["status"] = "untouched columns do not pack"
    if not math.isfinite(out["bound"]):
        out["bound"] = 0.0
    return out


def _repack(workload, devices, placement, untouched, mode) -> Placement | None:
    """Places the columns no scan reads whole: in budget mode each on its cheapest device
    (never dearer than any fractional placement); in capacity mode first-fit decreasing into
    the room the other columns leave, cheapest device first. None when they do not fit."""
    out = {k: v for k, v in placement.items() if k not in set(untouched)}
    if mode != "capacity":
        for k in untouched:
            c = workload.columns[k]
            out[k] = min(devices, key=lambda d: (c.size_on(d) * d.cost_per_byte(), d.name)).name
        return out
    by = {d.name: d for d in devices}
    free = {d.name: float(d.capacity or 0.0) for d in devices}
    for k, dn in out.items():
        free[dn] -= workload.columns[k].size_on(by[dn])
    cheap_first = sorted(devices, key=lambda d: (d.cost_ct_per_gb, -throughput(d), d.name))
    for k in sorted(untouched, key=lambda k: -workload.columns[k].raw_bytes):
        for d in cheap_first:
            sz = workload.columns[k].size_on(d)
            if sz <= free[d.name] + 1e-9:
                free[d.name] -= sz
                out[k] = d.name
                break
        else:
            return None
    return out


def _usage(workload, devices, cols, mode) -> list[list[list[float]]]:
    """Per column and device, what placing it there uses of each coupled resource: in capacity
    mode the bytes on each device (a vector over devices), in budget mode the cents (one)."""
    nd = len(devices)
    out = []
    for k in cols:
        col = workload.columns[k]
        row = []
        for d, dev in enumerate(devices):
            if mode == "capacity":
                v = [0.0] * nd
                v[d] = col.size_on(dev)
            else:
                v = [col.size_on(dev) * dev.cost_per_byte()]
            row.append(v)
        out.append(row)
    return out


def _lagrange(
    workload: Workload,
    devices: list[Device],
    counts: dict[Scan, float],
    *,
    mode: str,
    budget_ct: float | None,
    upper: float,
    deadline: float,
    iterations: int,
    opts: dict,
) -> dict:
    """Lagrangian relaxation of the capacities (or the budget), the only constraints tables
    share: for multipliers lam >= 0, L(lam) = sum_t min_x [time_t(x) + lam . use_t(x)] - lam . rhs
    is a lower bound on the optimum (each table's minimum from its own small MIP, each still
    under the full capacities or its share of the budget). Subgradient ascent (Polyak steps
    towards ``upper``) over ``iterations``. Returns the best bound, the cuts that give it to the
    full MIP (per table: time + lam . use >= that table's minimum), and the best placement the
    tables' solutions made when they fitted together."""
    tables = workload.tables()
    mins = {t: min_cost(_sub(workload, keys), devices) for t, keys in tables.items()}
    total_min = sum(mins.values())
    if mode == "capacity":
        rhs = [float(d.capacity or 0.0) for d in devices]
    else:
        rhs = [float(budget_ct)]
    lam = [0.0] * len(rhs)
    best = {"bound": 0.0, "cuts": [], "lam": list(lam), "placement": None, "time": upper}
    best["iterations"] = 0
    theta, stall = 1.0, 0
    by = {d.name: d for d in devices}
    for it in range(iterations):
        total, used = 0.0, [0.0] * len(rhs)
        cuts, placement, complete = [], {}, True
        for t, keys in sorted(tables.items()):
            tscans = {s: n for s, n in counts.items() if s.table == t}
            keys = sorted(keys)
            b = None if budget_ct is None else budget_ct - (total_min - mins[t])
            left = deadline - time.perf_counter()
            if left <= 0:
                return best
            r = _mip(
                workload,
                devices,
                keys,
                tscans,
                mode=mode,
                budget=b,
                time_limit=left,
                prices=lam,
                **opts,
            )
            if r["placement"] is None:
                complete = False
                total += r["bound"] if r["bound"] > 0 else 0.0
                continue
            total += r["bound"]
            placement.update(r["placement"])
            uses = _usage(workload, devices, keys, mode)
            dn = [d.name for d in devices]
            for i, k in enumerate(keys):
                for j, u in enumerate(uses[i][dn.index(r["placement"][k])]):
                    used[j] += u
            if tscans:
                cuts.append((list(tscans), list(lam), r["bound"]))
        bound = total - sum(p * v for p, v in zip(lam, rhs))
        best["iterations"] = it + 1
        if it == 0:
            best["cuts0"] = cuts  # the tables alone (lam = 0): kept as cuts whatever follows
        if bound > best["bound"]:
            best.update(bound=bound, cuts=cuts, lam=list(lam))
            best.setdefault("cuts0", cuts)
            stall = 0
        else:
            stall += 1
            if stall >= 2:
                theta, stall = theta / 2, 0
        if (
            complete
            and len(placement) == len(workload.columns)
            and _fits(workload, devices, placement, mode, budget_ct)
        ):
            tt = sum(n * scan_time(s, workload, by, placement) for s, n in counts.items())
            if tt < best["time"]:
                best.update(time=tt, placement=placement)
        up = best["time"]
        if up - best["bound"] <= opts["mip_gap"] * up:
            break
        g = [u - r for u, r in zip(used, rhs)]
        norm = sum(x * x for x in g)
        if norm == 0:
            break
        step = theta * (up - bound) / norm
        lam = [max(0.0, p + step * x) for p, x in zip(lam, g)]
    return best


def _start_placement(workload, devices, mode, budget_ct) -> Placement | None:
    """A feasible placement to start the solver from: HOT-column in capacity mode (None when it
    cannot pack), every column on its cheapest device in budget mode."""
    if mode == "capacity":
        try:
            return hot_column(workload, devices).placement
        except InvalidArgumentError:
            return None
    return {
        k: min(devices, key=lambda d: c.size_on(d) * d.cost_per_byte()).name
        for k, c in workload.columns.items()
    }


def cheapen(
    workload: Workload, devices: list[Device], placement: Placement, *, mode: str = "capacity"
) -> Placement:
    """The secondary objective: moves each column to the cheapest device where it fits and no
    scan that reads it gets slower (columns no scan reads go to the cheapest device with room).
    The predicted time never grows; the cost never grows."""
    by = {d.name: d for d in devices}
    out = dict(placement)
    free = {
        d.name: (float(d.capacity) if mode == "capacity" and d.capacity is not None else None)
        for d in devices
    }
    for k, dn in out.items():
        if free[dn] is not None:
            free[dn] -= workload.columns[k].size_on(by[dn])
    reads: dict[str, list[Scan]] = {}
    for s in workload.distinct_scans():
        for k in s.column_keys():
            reads.setdefault(k, []).append(s)
    cheap_first = sorted(devices, key=lambda d: (d.cost_ct_per_gb, -throughput(d), d.name))
    for k in sorted(out, key=lambda k: -workload.columns[k].raw_bytes):
        col = workload.columns[k]
        cur = by[out[k]]
        cur_cost = col.size_on(cur) * cur.cost_per_byte()
        for d in cheap_first:
            if d.name == cur.name or col.size_on(d) * d.cost_per_byte() >= cur_cost:
                continue
            if free[d.name] is not None and col.size_on(d) > free[d.name] + 1e-9:
                continue
            before = [scan_time(s, workload, by, out) for s in reads.get(k, [])]
            out[k] = d.name
            after = [scan_time(s, workload, by, out) for s in reads.get(k, [])]
            if all(a <= b * (1 + 1e-12) + 1e-15 for a, b in zip(after, before)):
                if free[d.name] is not None:
                    free[d.name] -= col.size_on(d)
                    free[cur.name] += col.size_on(cur)
                break
            out[k] = cur.name
    return out


def solve(workload: Workload, devices: list[Device], strategy: str, **kw) -> Result:
    if strategy == "lopt":
        return lopt(workload, devices, **kw)
    if kw.get("mode", "capacity") != "capacity":
        raise InvalidArgumentError(
            f"{strategy} is defined in capacity mode only (the source leaves HOT undefined in "
            "budget mode: it cannot choose device sizes)"
        )
    if strategy == "hot-column":
        return hot_column(workload, devices)
    if strategy == "hot-table":
        return hot_table(workload, devices)
    raise InvalidArgumentError(f"unknown strategy {strategy!r} (known: {', '.join(STRATEGIES)})")


def pareto(workload: Workload, devices: list[Device], *, points: int = 12, **kw) -> list[Result]:
    """Budget-mode LOPT over budgets from the cheapest placement up to the cost of the fastest
    single-device placement; the curve of budget vs predicted time."""
    lo = min_cost(workload, devices)
    hi = max(
        sum(c.size_on(d) * d.cost_per_byte() for c in workload.columns.values()) for d in devices
    )
    hi = max(hi, lo * 1.0001)
    out: list[Result] = []
    for i in range(points):
        b = lo + (hi - lo) * i / max(1, points - 1)
        # the previous point's placement fits this larger budget: a start for the solver
        prev = out[-1].placement if out else None
        out.append(lopt(workload, devices, mode="budget", budget_ct=b, start=prev, **kw))
    return out


def advise(curve: list[Result], *, within: float = 0.05) -> dict:
    """Purchase advice from a Pareto curve: the cheapest budget whose predicted time is within
    ``within`` of the best on the curve, and what to buy for it (bytes per device)."""
    if not curve:
        raise InvalidArgumentError("advise: empty curve")
    best = min(r.predicted_s for r in curve)
    pick = min((r for r in curve if r.predicted_s <= best * (1 + within)), key=lambda r: r.cost_ct)
    return {
        "budget_ct": pick.extra.get("budget_ct", pick.cost_ct),
        "cost_ct": pick.cost_ct,
        "predicted_s": pick.predicted_s,
        "best_predicted_s": best,
        "within": within,
        "buy_bytes": {n: v for n, v in pick.used_bytes.items() if v > 0},
    }


def scans_of(workload: Workload) -> list[Scan]:
    return list(workload.distinct_scans())
