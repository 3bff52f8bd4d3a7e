"""Measured vs predicted time per query on emulated devices.

For each query, each of its table scans is retrieved as the source's retriever does (§2.3.3):
the page cache of the scan's column files is dropped, then the files are read in parallel, one
pool of readers per device (:meth:`Emulator.read_files`). Then the retriever hands the columns to
the engine: each column file is decoded (Parquet, from the page cache the retriever filled) into
an Arrow array, each table the query reads becomes an Arrow table of the columns its scans read,
and DuckDB runs the query unchanged over them (``engine="arrow"``, the default). With
``engine="views"`` DuckDB reads the store's ``POSITIONAL JOIN`` views instead; DuckDB plans joins
over those views badly (TPC-H Q9 takes about 30 times as long as over the same data as Arrow
tables here), so the engine time would swamp what is measured. The measured time is the sum
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
    engine: str = "arrow",
) -> list[dict]:
    """One row per query: predicted, measured (mean over ``repeats``), I/O and engine seconds."""
    by = {d.name: d for d in devices}
    placement = store.placement()
    con = connect(store) if engine == "views" else None
    rows = []
    with emu.throttled():
        for q, scans in workload.queries.items():
            rows.append(_one(emu, store, workload, sql, con, by, placement, q, scans, repeats))
            if progress is not None:
                progress(q)
    if con is not None:
        con.close()
    return rows


def _arrow_con(store: Store, scans):
    """A DuckDB connection with each table the scans read registered as an Arrow table of the
    columns they read (decoded from the column files)."""
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    need: dict[str, list[str]] = {}
    for s in scans:
        cols = need.setdefault(s.table, [])
        cols.extend(c for c in s.columns if c not in cols)
    con = duckdb.connect()
    for t, cols in need.items():
        order = [c for c in store.manifest["tables"][t]["columns"] if c in cols]
        arrays = [pq.read_table(store.column_path(f"{t}.{c}")).column(0) for c in order]
        con.register(t, pa.Table.from_arrays(arrays, names=order))
    return con


def _one(emu, store, workload, sql, con, by, placement, q, scans, repeats) -> dict:
    predicted = sum(scan_time(s, workload, by, placement) for s in scans)
    ios, engines = [], []
    for _ in range(repeats):
        io = 0.0
        for s in scans:
            files = [store.column_path(k) for k in s.column_keys()]
            io += emu.read_files(files)["seconds"]
        t0 = time.perf_counter()
        c = con if con is not None else _arrow_con(store, scans)
        c.execute(sql[q]).fetchall()
        if con is None:
            c.close()
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
