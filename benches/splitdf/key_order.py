"""Would other key numbers or Parquet encodings shrink the fact table? An experiment on a split.

The writer numbers a dimension's rows by ``dense_rank()`` over the group's values (value order).
This script rewrites a split's fact file (Parquet, zstd, same DuckDB writer) four ways and reports
the bytes of the fact file and of its key columns:

- ``as written``: the fact re-encoded unchanged (Parquet format version 1, DuckDB's default);
- ``first appearance``: every key renumbered by the row where its value first appears, so keys
  follow the input's row order (runs and sorted inputs give small deltas);
- ``V2``: both of the above with ``PARQUET_VERSION V2`` (delta encodings for integers).

The dimensions are unchanged (renumbering only permutes their rows), so the fact's bytes are the
whole difference. With ``--unsplit FILE`` the unsplit Parquet file is re-encoded the same two
ways (V1, V2) too, and the split's total (fact + dimension files, dimensions re-encoded with the
same version) is compared with it. Writes only to a temporary directory.

Usage: .venv/bin/python benches/splitdf/key_order.py SPLIT_DIR [--unsplit FILE] [--out FILE]
Prints one JSON object; with --out also appends it (with `command` and `machine`) to FILE.
"""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # machine() of the benchmark rows


def key_bytes(path: Path, keys: list[str]) -> int:
    meta = pq.ParquetFile(path).metadata
    total = 0
    for rg in range(meta.num_row_groups):
        g = meta.row_group(rg)
        for c in range(g.num_columns):
            col = g.column(c)
            if col.path_in_schema in keys:
                total += col.total_compressed_size
    return total


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    split_dir = Path(argv[0])
    out = argv[argv.index("--out") + 1] if "--out" in argv else None
    unsplit = argv[argv.index("--unsplit") + 1] if "--unsplit" in argv else None
    schema = json.loads((split_dir / "schema.json").read_text())
    fact = split_dir / schema["fact"]["file"]
    keys = list(schema["fact"]["keys"])
    cols = list(schema["fact"]["columns"])
    con = duckdb.connect()
    con.execute("SET preserve_insertion_order = true")
    con.execute(
        f"CREATE TABLE f AS SELECT row_number() OVER () AS __rid, * FROM read_parquet('{fact}')"
    )
    for k in keys:
        ktype = con.execute(f'SELECT typeof("{k}") FROM f LIMIT 1').fetchall()[0][0]
        con.execute(
            f'CREATE TABLE "m_{k}" AS SELECT "{k}" AS old, '
            f"CAST(row_number() OVER (ORDER BY first) - 1 AS {ktype}) AS new "
            f'FROM (SELECT "{k}", min(__rid) AS first FROM f GROUP BY "{k}")'
        )
    sel = [f'f."{c}"' for c in cols] + [f'"m_{k}".new AS "{k}"' for k in keys]
    joins = " ".join(f'JOIN "m_{k}" ON f."{k}" = "m_{k}".old' for k in keys)
    first = f"SELECT {', '.join(sel)} FROM f {joins} ORDER BY f.__rid"
    same = "SELECT * EXCLUDE (__rid) FROM f ORDER BY __rid"
    row = {
        "bench": "splitdf-keyorder",
        "split": str(split_dir),
        "fact_file_bytes": fact.stat().st_size,
    }
    with tempfile.TemporaryDirectory(prefix="attune-splitdf-keyorder") as tmp:
        for name, sql in (("as_written", same), ("first_appearance", first)):
            for ver in ("V1", "V2"):
                p = Path(tmp) / f"{name}_{ver}.parquet"
                con.execute(
                    f"COPY ({sql}) TO '{p}' "
                    f"(FORMAT parquet, COMPRESSION zstd, PARQUET_VERSION {ver})"
                )
                row[f"{name}_{ver}_bytes"] = p.stat().st_size
                row[f"{name}_{ver}_key_bytes"] = key_bytes(p, keys)
        if unsplit:
            for ver in ("V1", "V2"):
                opts = f"(FORMAT parquet, COMPRESSION zstd, PARQUET_VERSION {ver})"
                p = Path(tmp) / f"unsplit_{ver}.parquet"
                con.execute(f"COPY (SELECT * FROM read_parquet('{unsplit}')) TO '{p}' {opts}")
                row[f"unsplit_{ver}_bytes"] = p.stat().st_size
                dims = 0
                for d in schema["dims"]:
                    q = Path(tmp) / f"dim_{ver}.parquet"
                    src = split_dir / d["file"]
                    con.execute(f"COPY (SELECT * FROM read_parquet('{src}')) TO '{q}' {opts}")
                    dims += q.stat().st_size
                split_total = row[f"as_written_{ver}_bytes"] + dims
                row[f"split_{ver}_bytes"] = split_total
                row[f"reduction_vs_parquet_{ver}"] = round(1 - split_total / p.stat().st_size, 4)
    print(json.dumps(row))
    if out:
        command = " ".join(
            shlex.quote(a) for a in ["attune", "bench", "splitdf", "key-order"] + argv
        )
        with open(out, "a") as f:
            f.write(json.dumps({**row, "command": command, "machine": run.machine()}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
