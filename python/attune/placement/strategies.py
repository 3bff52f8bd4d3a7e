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


def hot_column(workload: Workload, devices: list[Device]) -> Result:
    """Columns by accesses (descending; ties: larger first, which packs better) onto the fastest
    device with room."""
    _need_capacities(devices, "hot-column")
    free = {d.name: float(d.capacity or 0.0) for d in devices}
    acc = workload.access_counts()
    placement: Placement = {}
    order = sorted(workload.columns, key=lambda k: (-acc[k], -workload.columns[k].raw_bytes, k))
    for k in order:
        _place_on_fastest(workload, devices, free, placement, k)
    return _result("hot-column", "capacity", workload, devices, placement)


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
) -> Result:
    """The optimal placement under the model (see the module docstring)."""
    import highspy

    if mode not in ("capacity", "budget"):
        raise InvalidArgumentError(f"mode must be 'capacity' or 'budget', got {mode!r}")
    if mode == "capacity":
        _need_capacities(devices, "lopt")
        total_cap = {d.name: float(d.capacity or 0.0) for d in devices}
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

    cols = sorted(workload.columns)
    ci = {k: i for i, k in enumerate(cols)}
    nd = len(devices)
    scans = workload.distinct_scans()
    scan_list = sorted(scans, key=lambda s: (s.table, s.columns))
    if sample < 1.0:
        rng = random.Random(seed)
        keep = max(1, round(sample * len(scan_list)))
        scan_list = sorted(rng.sample(scan_list, keep), key=lambda s: (s.table, s.columns))
    si = {s: i for i, s in enumerate(scan_list)}

    with _quiet_stdout():
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit_s))
    h.setOptionValue("mip_rel_gap", float(mip_gap))
    h.setOptionValue("threads", int(threads))
    inf = highspy.kHighsInf

    def xv(c: int, d: int) -> int:
        return c * nd + d

    nx = len(cols) * nd
    dnames = [d.name for d in devices]
    costs = [[workload.columns[k].size_on(d) * d.cost_per_byte() for d in devices] for k in cols]
    # time scale for eps: the fastest-possible time is not known; use the slowest total instead
    tmax = (
        sum(
            n
            * max(
                sum(column_time(workload.columns[k], d) for k in s.column_keys()) for d in devices
            )
            for s, n in scans.items()
        )
        or 1.0
    )
    cmax = sum(max(r) for r in costs) or 1.0
    eps = 1e-7 * tmax / cmax if secondary == "objective" else 0.0
    for i in range(len(cols)):
        for d in range(nd):
            h.addVar(0.0, 1.0)
            h.changeColCost(xv(i, d), eps * costs[i][d])
    for s in scan_list:
        h.addVar(0.0, inf)
        h.changeColCost(nx + si[s], float(scans[s]))
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
            h.addRow(-inf, total_cap[dev.name], len(idx), idx, val)
    else:
        idx = [xv(i, d) for i in range(len(cols)) for d in range(nd)]
        val = [costs[i][d] for i in range(len(cols)) for d in range(nd)]
        h.addRow(-inf, float(budget_ct), len(idx), idx, val)
    if no_regression is not None:
        from attune.placement.model import check_placement

        check_placement(workload, devices, no_regression)
        by = {d.name: d for d in devices}
        for qscans in workload.queries.values():
            bound = sum(scan_time(s, workload, by, no_regression) for s in qscans)
            counts: dict[int, float] = {}
            for s in qscans:
                if s in si:
                    counts[nx + si[s]] = counts.get(nx + si[s], 0.0) + 1.0
            if counts:
                h.addRow(
                    -inf,
                    bound * (1 + 1e-9) + 1e-12,
                    len(counts),
                    list(counts),
                    list(counts.values()),
                )

    start = None
    if warm_start:
        start = _start_placement(workload, devices, mode, budget_ct)
        if start is not None:
            sol = highspy.HighsSolution()
            vals = [0.0] * (nx + len(scan_list))
            for i, k in enumerate(cols):
                vals[xv(i, dnames.index(start[k]))] = 1.0
            by = {d.name: d for d in devices}
            for s in scan_list:
                vals[nx + si[s]] = scan_time(s, workload, by, start)
            sol.col_value = vals
            h.setSolution(sol)

    t0 = time.perf_counter()
    with _quiet_stdout():
        h.run()
    solve_s = time.perf_counter() - t0
    status = h.getModelStatus()
    status_s = h.modelStatusToString(status)
    if status in (
        highspy.HighsModelStatus.kInfeasible,
        highspy.HighsModelStatus.kUnboundedOrInfeasible,
    ):
        what = "capacities" if mode == "capacity" else f"budget {budget_ct:.2f} ct"
        extra = " with the no-regression constraint" if no_regression is not None else ""
        raise InvalidArgumentError(f"infeasible: no placement fits the {what}{extra}")
    info = h.getInfo()
    if info.primal_solution_status != 2:  # kSolutionStatusFeasible
        raise InvalidArgumentError(
            f"lopt: the solver found no placement within {time_limit_s} s (status {status_s})"
        )
    sol = h.getSolution().col_value
    placement: Placement = {}
    for i, k in enumerate(cols):
        d = max(range(nd), key=lambda d: sol[xv(i, d)])
        placement[k] = devices[d].name
    gap = max(0.0, float(info.mip_gap))
    if secondary is True:
        placement = cheapen(workload, devices, placement, mode=mode)
    return _result(
        "lopt",
        mode,
        workload,
        devices,
        placement,
        solve_s=solve_s,
        status="optimal" if status == highspy.HighsModelStatus.kOptimal else status_s,
        gap=gap,
        distinct_scans=len(scans),
        sampled_scans=len(scan_list),
        extra={
            "bound_s": float(info.mip_dual_bound),
            "nodes": int(info.mip_node_count),
            "warm_start": start is not None,
            **({"budget_ct": budget_ct} if mode == "budget" else {}),
        },
    )


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
    out = []
    for i in range(points):
        b = lo + (hi - lo) * i / max(1, points - 1)
        out.append(lopt(workload, devices, mode="budget", budget_ct=b, **kw))
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
