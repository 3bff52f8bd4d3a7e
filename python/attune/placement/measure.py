"""Measured vs predicted time per query on emulated devices.

For each query, each of its table scans is retrieved as the source's retriever does (§2.3.3):
the page cache of the scan's column files is dropped, then the files are read in parallel, one
pool of readers per device (:meth:`Emulator.read_files`). Then DuckDB runs the query unchanged
over the store's views, from the page cache the retriever filled. The measured time is the sum
of the scans' retrieval times plus the engine's time; the prediction is the cost model's sum of
the scans' ``t_T`` (Equation 2.3) with the calibrated device catalogue. The engine time is what
the model leaves out (its assumption 2, "queries are I/O dominated"); it is reported apart.
"""

from __future__ import annotations

import statistics
import time

from attune.placement.devices import Device
from attune.placement.emulate import Emulator
from attune.placement.model import Workload, scan_time
from attune.placement.store import Store, connect


def run_queries(
    emu: Emulator,
    store: Store,
    workload: Workload,
    sql: dict[str, str],
    devices: list[Device],
    *,
    repeats: int = 1,
    progress=None,
) -> list[dict]:
    """One row per query: predicted, measured (mean over ``repeats``), I/O and engine seconds."""
    by = {d.name: d for d in devices}
    placement = store.placement()
    con = connect(store)
    rows = []
    with emu.throttled():
        for q, scans in workload.queries.items():
            rows.append(_one(emu, store, workload, sql, con, by, placement, q, scans, repeats))
            if progress is not None:
                progress(q)
    con.close()
    return rows


def _one(emu, store, workload, sql, con, by, placement, q, scans, repeats) -> dict:
    predicted = sum(scan_time(s, workload, by, placement) for s in scans)
    ios, engines = [], []
    for _ in range(repeats):
        io = 0.0
        for s in scans:
            files = [store.column_path(k) for k in s.column_keys()]
            io += emu.read_files(files)["seconds"]
        t0 = time.perf_counter()
        con.execute(sql[q]).fetchall()
        engines.append(time.perf_counter() - t0)
        ios.append(io)
    io_s, engine_s = statistics.fmean(ios), statistics.fmean(engines)
    measured = io_s + engine_s
    return {
        "query": q,
        "predicted_s": predicted,
        "measured_s": measured,
        "io_s": io_s,
        "engine_s": engine_s,
        "error": (predicted - measured) / measured if measured > 0 else 0.0,
        "scans": len(scans),
    }
