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


def hot_table(workload: Workload, devices: list[Device]) -> Result:
    """Tables by accesses (descending) onto the fastest device with room for the whole table.

    A table that fits on no device whole is placed column by column, largest column first, on
    the fastest device with room (the source does not say what its HOT-table does then)."""
    _need_capacities(devices, "hot-table")
    free = {d.name: float(d.capacity or 0.0) for d in devices}
    acc: dict[str, int] = {t: 0 for t in workload.tables()}
    for s, n in workload.distinct_scans().items():
        acc[s.table] += n
    tables = workload.tables()
    size_t = {
        t: {d.name: sum(workload.columns[k].size_on(d) for k in keys) for d in devices}
        for t, keys in tables.items()
    }
    placement: Placement = {}
    split = []
    for t in sorted(tables, key=lambda t: (-acc[t], -size_t[t][devices[0].name], t)):
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
        rest = order[i + 1 :]
        col = workload.columns[k]
        for d in _fastest_first(devices):
            sz = col.size_on(d)
            if sz <= free[d.name]:
                free[d.name] -= sz
                if _packs(workload, devices, free, rest):
                    placement[k] = d.name
                    break
                free[d.name] += sz
        else:
            raise _capacity_error(f"column {k}", col.size_on(devices[0]), free)
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
    decompose: bool = True,
    start: Placement | None = None,
) -> Result:
    """The optimal placement under the model (see the module docstring).

    ``decompose``: first solve each table alone (the scans of one table only involve its
    columns; tables share only the capacities or the budget). Each table's optimum is a lower
    bound on its share of the objective, added as a constraint; when the tables' placements
    together fit, they are the optimum and the full MIP is skipped. ``warm_start`` starts the
    full MIP from HOT-column (capacity mode) or the cheapest placement (budget mode).
    ``secondary`` True: the cost post-pass :func:`cheapen`; ``"objective"``: an ``eps * cost``
    term in the objective (slower to prove optimal); False: neither."""
    if mode not in ("capacity", "budget"):
        raise InvalidArgumentError(f"mode must be 'capacity' or 'budget', got {mode!r}")
    if mode == "capacity":
        _need_capacities(devices, "lopt")
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
    opts = {"mip_gap": mip_gap, "threads": threads, "cuts": cuts, "secondary": secondary}

    # 1. each table alone: a lower bound per table, and often the optimum
    tables = workload.tables()
    table_bounds: list[tuple[list[Scan], float]] = []
    parts: Placement = {}
    parts_optimal = decompose and len(tables) > 1
    if decompose and len(tables) > 1:
        mins = {t: min_cost(_sub(workload, keys), devices) for t, keys in tables.items()}
        total_min = sum(mins.values())
        for t, keys in sorted(tables.items()):
            tscans = {s: n for s, n in counts.items() if s.table == t}
            b = None if budget_ct is None else budget_ct - (total_min - mins[t])
            # at most 40 % of the time limit on the tables alone; the rest is the full MIP's
            left = t0 + 0.4 * float(time_limit_s) - time.perf_counter()
            if left <= 0:
                parts_optimal = False
                break
            r = _mip(
                workload,
                devices,
                sorted(keys),
                tscans,
                mode=mode,
                budget=b,
                time_limit=left,
                **opts,
            )
            if r["placement"] is None:
                parts_optimal = False
                continue
            parts.update(r["placement"])
            parts_optimal &= r["optimal"]
            if tscans:
                table_bounds.append((list(tscans), r["bound"]))
        if (
            parts_optimal
            and no_regression is None
            and _fits(workload, devices, parts, mode, budget_ct)
        ):
            return _lopt_result(
                workload,
                devices,
                parts,
                mode,
                budget_ct,
                secondary,
                time.perf_counter() - t0,
                "optimal",
                sum(lb for _, lb in table_bounds),
                scans,
                scan_list,
                {
                    "decomposed": True,
                    "nodes": 0,
                    "warm_start": False,
                    "solve_cpu_s": time.process_time() - c0,
                },
            )

    # 2. the full MIP, with the tables' bounds and a start
    given, start = start, None
    if warm_start:
        start = _start_placement(workload, devices, mode, budget_ct)
        if given is not None and _fits(workload, devices, given, mode, budget_ct):
            by = {d.name: d for d in devices}
            if start is None or sum(
                n * scan_time(s, workload, by, given) for s, n in counts.items()
            ) < sum(n * scan_time(s, workload, by, start) for s, n in counts.items()):
                start = given
        if (
            parts
            and len(parts) == len(workload.columns)
            and _fits(workload, devices, parts, mode, budget_ct)
        ):
            start = parts
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
        table_bounds=table_bounds,
        nr_rows=nr_rows,
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
) -> dict:
    """Builds and solves LOPT over ``cols`` and the scans in ``counts``; see the module doc."""
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
    for i in range(len(cols)):
        for d in range(nd):
            h.addVar(0.0, 1.0)
            h.changeColCost(xv(i, d), eps * costs[i][d])
    for s in scan_list:
        h.addVar(0.0, inf)
        h.changeColCost(nx + si[s], counts[s])
    if nx:
        h.changeColsIntegrality(nx, list(range(nx)), [highspy.HighsVarType.kInteger] * nx)
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
    if mode == "capacity":
        for d, dev in enumerate(devices):
            idx = [xv(i, d) for i in range(len(cols))]
            val = [workload.columns[k].size_on(dev) for k in cols]
            h.addRow(-inf, float(dev.capacity or 0.0), len(idx), idx, val)
    else:
        idx = [xv(i, d) for i in range(len(cols)) for d in range(nd)]
        val = [costs[i][d] for i in range(len(cols)) for d in range(nd)]
        h.addRow(-inf, float(budget), len(idx), idx, val)
    for tscans, lb in table_bounds or []:
        idx = [nx + si[s] for s in tscans]
        h.addRow(lb * (1 - 1e-9), inf, len(idx), idx, [counts[s] for s in tscans])
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
    if not math.isfinite(out["bound"]):
        out["bound"] = 0.0
    return out


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
