"""Where does a notebook step's time go? EXPLAIN ANALYZE of one step on unsplit and split data.

Loads an unsplit Parquet file and a split directory (both as in-memory DuckDB tables, as the
notebook benchmark does), then for each requested step of ``run.py``'s notebook prints, for the
unsplit table, for the split table with eager aggregation off (join, then aggregate) and with it
on (the default): the median and minimum wall time and the median CPU time of --runs runs
(rewrite memoized, so DuckDB time only), the DuckDB operators that took the most time (from
``EXPLAIN ANALYZE``'s JSON profile) and the SQL. Both connections run with the perfect-hash
threshold ``connect()`` sets for the split. Two control sides:

- ``unsplit through a no-op join``: the unsplit query with the table replaced by itself joined
  to a one-row table on ``rowid * 0 = 0`` (every row matches once; same rows, same columns):
  what a hash join in front of the same aggregation costs in DuckDB;
- ``split eager=True, perfect_ht_threshold=12``: the default rewrite with DuckDB's default
  perfect-hash threshold, i.e. without the setting ``connect()`` raises;

and ``split eager forced``: every candidate dimension pushed, whatever the size rules say.

Usage: .venv/bin/python benches/splitdf/explain.py DATASET UNSPLIT.parquet SPLIT_DIR [STEP,...]
           [--runs N] [--out FILE]
e.g.   .venv/bin/python benches/splitdf/explain.py accidents \\
           /tmp/attune-splitdf/accidents_zstd.parquet /tmp/attune-splitdf/accidents_split by_state
Prints one JSON line per (step, side); with --out also appends them, with `command` and
`machine`, to FILE.
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

# Runs per (step, side) unless --runs: median and minimum of 5 (the machine is shared).
RUNS = 5


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


def timed(f, runs: int) -> dict:
    f()  # warm: the first run of a new SQL text pays DuckDB's planning caches
    wall, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        f()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return {
        "median_s": round(statistics.median(wall), 5),
        "min_s": round(min(wall), 5),
        "median_cpu_s": round(statistics.median(cpu), 5),
    }


def _through_noop_join(sql: str) -> str:
    """``sql`` with the table ``data`` read through a join that keeps every row once."""
    noop = (
        '(SELECT __t.* FROM "data" AS __t INNER JOIN (SELECT 0 AS __z) AS __j '
        "ON __t.rowid * 0 = __j.__z)"
    )
    return sql.replace('"data"', noop, 1)


def main(argv: list[str]) -> int:
    import argparse
    import shlex

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("unsplit")
    ap.add_argument("split_dir")
    ap.add_argument("steps", nargs="?", default=None)
    ap.add_argument("--runs", type=int, default=RUNS)
    ap.add_argument("--out", default=None)
    opts = ap.parse_args(argv)
    dataset, unsplit, split_dir = opts.dataset, opts.unsplit, opts.split_dir
    only = set(opts.steps.split(",")) if opts.steps else None
    command = " ".join(shlex.quote(a) for a in ["attune", "bench", "splitdf", "explain"] + argv)
    mach = run.machine()
    sf = frames.connect(split_dir, load="table", name="sdata")
    bits = frames.splitdf.perfect_ht_bits(sf.schema)
    con = ibis.duckdb.connect()
    con.raw_sql(f"SET perfect_ht_threshold = {max(bits, 12)}")
    con.raw_sql(f"CREATE TEMP TABLE data AS SELECT * FROM read_parquet('{unsplit}')")
    tu = con.table("data")
    steps = zip(run.notebook(dataset, tu), run.notebook(dataset, sf.table))
    for (name, eu), (_, es) in steps:
        if only and name not in only:
            continue
        sql_u = str(con.compile(eu))
        out = [
            ("unsplit", con.con, sql_u, None),
            ("unsplit through a no-op join", con.con, _through_noop_join(sql_u), None),
        ]
        for eager in (False, True):
            sf.eager_aggregation = eager
            sf._cache.clear()
            out.append((f"split eager={eager}", sf.con.con, sf.sql(es), None))
        out.append(("split eager=True, perfect_ht_threshold=12", sf.con.con, out[-1][2], 12))
        # Every candidate dimension pushed, whatever the size rule says.
        sf.eager_max_fraction = 1e18
        out.append(("split eager forced", sf.con.con, sf.sql(es), None))
        sf.eager_max_fraction = frames.eager.MAX_PUSHED_KEYS_FRACTION
        for side, dcon, sql, pht in out:
            if pht is not None:
                dcon.execute(f"SET perfect_ht_threshold = {pht}")
            row = {
                "bench": "splitdf-explain",
                "dataset": dataset,
                "split": str(split_dir),
                "step": name,
                "side": side,
                "runs": opts.runs,
                **timed(lambda dcon=dcon, sql=sql: dcon.sql(sql).to_arrow_table(), opts.runs),
                "top_operators": top_operators(dcon, sql),
                "sql": sql,
            }
            if pht is not None:
                dcon.execute(f"SET perfect_ht_threshold = {max(bits, 12)}")
            print(json.dumps(row), flush=True)
            if opts.out:
                with open(opts.out, "a") as f:
                    f.write(json.dumps({**row, "command": command, "machine": mach}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
