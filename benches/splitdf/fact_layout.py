"""Would a cheap change of the fact's layout or of Parquet's options shrink a split against the
unsplit Parquet file? An experiment on a split directory and its unsplit file.

Every variant rewrites files with DuckDB's Parquet writer (zstd, as the split and the unsplit
file are written) into a temporary directory and reports total bytes and the reduction of the
split (fact + dimension files) against the unsplit file:

- ``as_written``: both re-encoded unchanged (the benchmark's measure);
- ``fact_sorted``: the fact sorted by its keys and offset-coded columns (smallest dimension
  first, so that its keys form the longest runs), the unsplit file unchanged: what sorting the
  fact alone would gain, as a split could (the format does not promise row order);
- ``both_sorted``: the unsplit file sorted by the same columns too (the grouped columns, in the
  same order), the fair comparison: a sort helps the unsplit file's dictionary indices as well;
- ``row_groups_1m``: both written with ``ROW_GROUP_SIZE 1048576`` instead of DuckDB's 122,880
  rows, so each column's dictionary is stored once per million rows, not once per 122,880;
- ``zstd_9``: both with ``COMPRESSION_LEVEL 9`` (DuckDB's default is zstd level 3).

Usage: .venv/bin/python benches/splitdf/fact_layout.py SPLIT_DIR UNSPLIT.parquet [--out FILE]
Prints one JSON object; with --out also appends it (with `command` and `machine`) to FILE.
Thread-safety: a script; one DuckDB connection.
"""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # machine() of the benchmark rows

# Options of every variant; the split and the unsplit file get the same ones.
BASE = "FORMAT parquet, COMPRESSION zstd"
VARIANTS = {
    "as_written": BASE,
    "fact_sorted": BASE,
    "both_sorted": BASE,
    "row_groups_1m": BASE + ", ROW_GROUP_SIZE 1048576",
    "zstd_9": BASE + ", COMPRESSION_LEVEL 9",
}


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def lit(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    split_dir, unsplit = Path(argv[0]), Path(argv[1])
    out = argv[argv.index("--out") + 1] if "--out" in argv else None
    schema = json.loads((split_dir / "schema.json").read_text())
    fact = split_dir / schema["fact"]["file"]
    dims = sorted(schema["dims"], key=lambda d: d["nrows"])
    offsets = list(schema["fact"].get("offsets", {}))
    # Fact sort: keys of the smallest dimensions first, then offset-coded columns.
    fact_order = [d["key"] for d in dims] + offsets
    # The same order on the unsplit table: each dimension's columns, then the offset columns.
    unsplit_order = [c for d in dims for c in d["columns"]] + offsets
    con = duckdb.connect()
    con.execute("SET preserve_insertion_order = true")
    row = {
        "bench": "splitdf-layout",
        "split": str(split_dir),
        "unsplit": str(unsplit),
        "fact_order": fact_order,
    }
    with tempfile.TemporaryDirectory(prefix="attune-splitdf-layout") as tmp:
        for name, opts in VARIANTS.items():
            f_sql = f"SELECT * FROM read_parquet({lit(fact)})"
            u_sql = f"SELECT * FROM read_parquet({lit(unsplit)})"
            if name in ("fact_sorted", "both_sorted"):
                f_sql += " ORDER BY " + ", ".join(q(c) for c in fact_order)
            if name == "both_sorted":
                u_sql += " ORDER BY " + ", ".join(q(c) for c in unsplit_order)
            fp, up = Path(tmp) / "fact.parquet", Path(tmp) / "unsplit.parquet"
            con.execute(f"COPY ({f_sql}) TO {lit(fp)} ({opts})")
            con.execute(f"COPY ({u_sql}) TO {lit(up)} ({opts})")
            dim_bytes = 0
            for d in schema["dims"]:
                dp = Path(tmp) / "dim.parquet"
                src = split_dir / d["file"]
                con.execute(f"COPY (SELECT * FROM read_parquet({lit(src)})) TO {lit(dp)} ({opts})")
                dim_bytes += dp.stat().st_size
            split_bytes = fp.stat().st_size + dim_bytes
            row[name] = {
                "fact_bytes": fp.stat().st_size,
                "dim_bytes": dim_bytes,
                "split_bytes": split_bytes,
                "unsplit_bytes": up.stat().st_size,
                "reduction_vs_parquet": round(1 - split_bytes / up.stat().st_size, 4),
            }
            print(f"# {name}: {row[name]}", file=sys.stderr, flush=True)
    print(json.dumps(row))
    if out:
        command = " ".join(
            shlex.quote(a) for a in ["attune", "bench", "splitdf", "fact-layout"] + argv
        )
        with open(out, "a") as f:
            f.write(json.dumps({**row, "command": command, "machine": run.machine()}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
