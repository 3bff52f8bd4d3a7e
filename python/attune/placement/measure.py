"""Measured vs predicted time per query on emulated devices.

For each query, each of its table scans is retrieved as the source's retriever does (§2.3.3):
the page cache of the scan's column files is dropped, then the files are read in parallel, one
pool of readers per device (:meth:`Emulator.read_files`). Then the retriever hands the columns to
the engine: each column file is decoded (Parquet, from the page cache the retriever filled) into
an Arrow array, each table the query reads becomes an Arrow table of the columns its scans read,
and DuckDB runs the query unchanged over them (``engine="arrow"``, the default). With
``engine="views"`` DuckDB reads the store's ``POSITIONAL JOIN`` views instead; DuckDB plans joins
over those views badly (TPC-H Q9 takes about 30 times as long as over the same data as Arrow
tables here), so the engine time would swamp what is measured.
With ``pipeline=True`` (the default) the retriever overlaps decoding with reading, as the
source's retriever hands chunks to the engine while it reads (§2.3.3): each column file is
handed, as soon as it is read, to a pool of decoder threads, so only the decoding of the last
files and DuckDB's own work follow the last read. ``pipeline=False`` reads everything first and
decodes afterwards (the earlier, sequential retriever).

The measured time is the query's wall time from its first read to DuckDB's last row. The
prediction is the cost model's sum of the scans' ``t_T`` (Equation 2.3) with the calibrated
device catalogue, plus, when given, a per-query engine term (:func:`engine_terms`): the time to
decode the query's column files and DuckDB's time over the decoded tables, both measured from
memory once, on one placement, and used unchanged for every other placement (neither depends on
where the columns live). Pipelined, the prediction is max(I/O, decode) + DuckDB
(:func:`engine_prediction`); sequential, the sum. The model alone (its assumption 2, "queries
are I/O dominated") is ``predicted_io_s``.
"""

from __future__ import annotations

import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from attune.errors import InvalidArgumentError
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
    pipeline: bool = True,
    decoders: int = 2,
    terms: dict[str, dict[str, float]] | None = None,
) -> list[dict]:
    """One row per query: predicted (model, plus the engine term of ``terms`` when given),
    measured (mean over ``repeats``), retrieval and engine seconds."""
    if engine not in ("arrow", "views"):
        raise InvalidArgumentError(f"engine must be arrow or views, got {engine!r}")
    if engine == "views" and pipeline:
        pipeline = False  # DuckDB reads the files itself; nothing to hand over
    by = {d.name: d for d in devices}
    placement = store.placement()
    con = connect(store) if engine == "views" else None
    rows = []
    with emu.throttled():
        for q, scans in workload.queries.items():
            if pipeline:
                row = _pipelined(
                    emu, store, workload, sql, by, placement, q, scans, repeats, decoders
                )
            else:
                row = _one(emu, store, workload, sql, con, by, placement, q, scans, repeats)
            row["pipeline"] = pipeline
            if terms is not None:
                if q not in terms:
                    raise InvalidArgumentError(f"engine terms: no term for query {q!r}")
                row["decode_term_s"] = terms[q]["decode_s"]
                row["exec_term_s"] = terms[q]["exec_s"]
                row["predicted_s"] = engine_prediction(row["predicted_io_s"], terms[q], pipeline)
                row["error"] = (row["predicted_s"] - row["measured_s"]) / row["measured_s"]
            rows.append(row)
            if progress is not None:
                progress(q)
    if con is not None:
        con.close()
    return rows


def _needed(store: Store, scans) -> dict[str, list[str]]:
    """Table -> the columns the scans read, in the table's order."""
    need: dict[str, set[str]] = {}
    for s in scans:
        need.setdefault(s.table, set()).update(s.columns)
    cols = store.manifest["tables"]
    return {t: [c for c in cols[t]["columns"] if c in cs] for t, cs in need.items()}


def _register(store: Store, scans, arrays: dict):
    """A DuckDB connection with each table the scans read registered as an Arrow table of the
    columns they read (``arrays``: column key -> decoded Arrow array)."""
    import duckdb
    import pyarrow as pa

    con = duckdb.connect()
    for t, order in _needed(store, scans).items():
        con.register(t, pa.Table.from_arrays([arrays[f"{t}.{c}"] for c in order], names=order))
    return con


def _decode_file(path: Path):
    import pyarrow.parquet as pq

    return pq.read_table(path).column(0)


def _decode_bytes(data):
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pq.read_table(pa.BufferReader(pa.py_buffer(data))).column(0)


def _arrow_con(store: Store, scans):
    """A DuckDB connection over the scans' columns decoded from their files."""
    keys = [f"{t}.{c}" for t, cs in _needed(store, scans).items() for c in cs]
    return _register(store, scans, {k: _decode_file(store.column_path(k)) for k in keys})


def engine_terms(
    store: Store, workload: Workload, sql: dict[str, str], *, repeats: int = 3, decoders: int = 2
) -> dict[str, dict[str, float]]:
    """Per query, the CPU work the model's I/O term leaves out, measured from memory (the
    column files' bytes read untimed first), median of ``repeats``: ``decode_s``, decoding the
    query's column files with ``decoders`` threads, and ``exec_s``, DuckDB's time over the
    decoded Arrow tables. Neither depends on where the columns are placed, so they are measured
    once, on one placement."""
    out = {}
    for q, scans in workload.queries.items():
        keys = [f"{t}.{c}" for t, cs in _needed(store, scans).items() for c in cs]
        raw = {k: store.column_path(k).read_bytes() for k in keys}
        decode, execs = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            with ThreadPoolExecutor(max_workers=decoders) as pool:
                futs = {k: pool.submit(_decode_bytes, raw[k]) for k in keys}
                arrays = {k: f.result() for k, f in futs.items()}
            t1 = time.perf_counter()
            con = _register(store, scans, arrays)
            con.execute(sql[q]).fetchall()
            con.close()
            decode.append(t1 - t0)
            execs.append(time.perf_counter() - t1)
        out[q] = {"decode_s": statistics.median(decode), "exec_s": statistics.median(execs)}
    return out


def engine_prediction(io_s: float, term: dict[str, float], pipeline: bool) -> float:
    """The whole query's predicted time from the model's I/O time and the query's engine term:
    with the pipelined retriever decoding overlaps reading, so the slower of the two counts,
    then DuckDB's work; with the sequential one they add up."""
    if pipeline:
        return max(io_s, term["decode_s"]) + term["exec_s"]
    return io_s + term["decode_s"] + term["exec_s"]


def _pipelined(emu, store, workload, sql, by, placement, q, scans, repeats, decoders) -> dict:
    predicted = sum(scan_time(s, workload, by, placement) for s in scans)
    key_of = {store.column_path(k): k for s in scans for k in s.column_keys()}
    ios, totals, tails = [], [], []
    for _ in range(repeats):
        futs: dict[str, object] = {}
        lock = threading.Lock()
        with ThreadPoolExecutor(max_workers=decoders) as pool:

            def on_file(path, data, pool=pool, futs=futs, lock=lock):
                k = key_of[Path(path)]
                with lock:
                    if k not in futs:
                        futs[k] = pool.submit(_decode_bytes, data)

            t0 = time.perf_counter()
            io = 0.0
            for s in scans:
                files = [store.column_path(k) for k in s.column_keys()]
                io += emu.read_files(files, on_file=on_file)["seconds"]
            t_read = time.perf_counter()
            arrays = {k: f.result() for k, f in futs.items()}
        con = _register(store, scans, arrays)
        con.execute(sql[q]).fetchall()
        con.close()
        end = time.perf_counter()
        ios.append(io)
        totals.append(end - t0)
        tails.append(end - t_read)
    io_s, measured = statistics.fmean(ios), statistics.fmean(totals)
    return {
        "query": q,
        "predicted_s": predicted,
        "predicted_io_s": predicted,
        "measured_s": measured,
        "io_s": io_s,
        "engine_s": statistics.fmean(tails),
        "error": (predicted - measured) / measured if measured > 0 else 0.0,
        "scans": len(scans),
    }


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
        "predicted_io_s": predicted,
        "measured_s": measured,
        "io_s": io_s,
        "engine_s": engine_s,
        "error": (predicted - measured) / measured if measured > 0 else 0.0,
        "scans": len(scans),
    }
