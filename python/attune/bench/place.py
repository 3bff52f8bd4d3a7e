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


def main(argv: list[str]) -> int:
    from attune.bench import machine
    from attune.placement import store as st
    from attune.placement import strategies as sg
    from attune.placement import trace as tr
    from attune.placement.devices import load_devices
    from attune.placement.model import Workload

    p = argparse.ArgumentParser(prog="attune bench place")
    p.add_argument("mode", choices=("mixes", "pareto"))
    p.add_argument("--store", required=True, help="column store (sizes from its files)")
    p.add_argument("--devices", help="device file (default: Table 2.1)")
    p.add_argument("--time-limit", type=float, default=5.0)
    p.add_argument("--slack", type=float, default=0.02, help="capacity slack per device in mixes")
    p.add_argument("--points", type=int, default=12)
    p.add_argument("--limit", type=int, default=None, help="first N mixes only")
    p.add_argument("--out", required=True, help="append rows to this JSON-lines file")
    a = p.parse_args(argv)
    s = st.open_store(a.store)
    devs = load_devices(a.devices)
    w = Workload(s.model_columns(), tr.extract_workload(tr.tpch_queries(), tr.TPCH_SCHEMA))
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
            for strat in sg.STRATEGIES:
                try:
                    kw = {"time_limit_s": a.time_limit} if strat == "lopt" else {}
                    r = sg.solve(w, dd, strat, **kw)
                    row = r.to_dict()
                    row.pop("placement")
                except InvalidArgumentError as e:
                    row = {"strategy": strat, "error": str(e)}
                row.update(mix={d.name: f for d, f in zip(devs, mix)}, bench="place-mixes")
                rows.append(row)
                print(
                    f"{mix} {strat:10} {row.get('predicted_s', float('nan')):.3f} s "
                    f"{row.get('status', row.get('error'))}",
                    file=sys.stderr,
                )
    else:
        for r in sg.pareto(w, devs, points=a.points, time_limit_s=a.time_limit):
            row = r.to_dict()
            row.pop("placement")
            row["bench"] = "place-pareto"
            rows.append(row)
    with open(a.out, "a", encoding="utf-8") as f:
        for row in rows:
            row.update(command=cmd, machine=mach, total_bytes=total)
            f.write(json.dumps(row) + "\n")
    return 0
