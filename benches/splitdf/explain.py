"""Where does a notebook step's time go? EXPLAIN ANALYZE of one step on unsplit and split data.

Loads an unsplit Parquet file and a split directory (both as in-memory DuckDB tables, as the
notebook benchmark does), then for each requested step of ``run.py``'s notebook prints, for the
unsplit table, for the split table with eager aggregation off (join, then aggregate) and with it
on (the default): the median wall time of 5 runs (rewrite memoized, so DuckDB time only), the
DuckDB operators that took the most time (from ``EXPLAIN ANALYZE``'s JSON profile) and the SQL.

Usage: .venv/bin/python benches/splitdf/explain.py DATASET UNSPLIT.parquet SPLIT_DIR [STEP,...]
e.g.   .venv/bin/python benches/splitdf/explain.py accidents \\
           /tmp/attune-splitdf/accidents_zstd.parquet /tmp/attune-splitdf/accidents_split by_state
Prints one JSON line per (step, side).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import ibis
import run

from attune import frames

RUNS = 5  # median of 5: the machine is shared


def top_operators(con, sql: str, k: int = 4) -> list[dict]:
    con.execute("PRAGMA enable_profiling = 'json'")
    con.execute("PRAGMA profiling_output = ''")
    try:
        rows = con.execute("EXPLAIN ANALYZE " + sql).fetchall()
    finally:
        con.execute("PRAGMA disable_profiling")
    prof = json.loads(rows[0][1])
    ops: list[dict] = []

    def walk(node) -> None:
        if isinstance(node, list):
            for n in node:
                walk(n)
            return
        name = node.get("type") or node.get("operator_type") or node.get("operator_name")
        timing = node.get("timing", node.get("operator_timing"))
        if name and timing is not None:
            ops.append(
                {
                    "op": str(name).strip(),
                    "s": round(float(timing), 4),
                    "rows": node.get("intermediate_rows", node.get("operator_cardinality")),
                }
            )
        walk(node.get("children", []))

    walk(prof.get("operator", prof.get("children", [])))
    return sorted(ops, key=lambda o: -o["s"])[:k]


def timed(f) -> float:
    xs = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        f()
        xs.append(time.perf_counter() - t0)
    return round(statistics.median(xs), 4)


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    dataset, unsplit, split_dir = argv[:3]
    only = set(argv[3].split(",")) if len(argv) > 3 else None
    con = ibis.duckdb.connect()
    con.raw_sql(f"CREATE TEMP TABLE data AS SELECT * FROM read_parquet('{unsplit}')")
    tu = con.table("data")
    sf = frames.connect(split_dir, load="table", name="sdata")
    steps = zip(run.notebook(dataset, tu), run.notebook(dataset, sf.table))
    for (name, eu), (_, es) in steps:
        if only and name not in only:
            continue
        sql_u = str(con.compile(eu))
        out = [("unsplit", con.con, sql_u)]
        for eager in (False, True):
            sf.eager_aggregation = eager
            sf._cache.clear()
            out.append((f"split eager={eager}", sf.con.con, sf.sql(es)))
        for side, dcon, sql in out:
            row = {
                "dataset": dataset,
                "step": name,
                "side": side,
                "median_s": timed(lambda dcon=dcon, sql=sql: dcon.sql(sql).to_arrow_table()),
                "top_operators": top_operators(dcon, sql),
                "sql": sql,
            }
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
