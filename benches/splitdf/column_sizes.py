"""Where do the bytes of a Parquet file go? Compressed bytes per column, unsplit vs split.

For every column of the unsplit Parquet file: its compressed size there, and where it went in the
split directory (the fact file or a dimension file) with its compressed size there; then the key
columns of the fact, which only the split has. Reads Parquet metadata only (pyarrow).

Usage: .venv/bin/python benches/splitdf/column_sizes.py UNSPLIT.parquet SPLIT_DIR [--out FILE]
Prints one JSON object; with --out also appends it (with `command` and `machine`) to FILE.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # machine() of the benchmark rows


def column_bytes(path: Path) -> dict[str, int]:
    """Compressed bytes per top-level column, summed over row groups."""
    meta = pq.ParquetFile(path).metadata
    out: dict[str, int] = {}
    for rg in range(meta.num_row_groups):
        g = meta.row_group(rg)
        for c in range(g.num_columns):
            col = g.column(c)
            name = col.path_in_schema.split(".")[0]
            out[name] = out.get(name, 0) + col.total_compressed_size
    return out


def main(argv: list[str]) -> int:
    out_file = None
    if len(argv) == 4 and argv[2] == "--out":
        out_file = Path(argv[3])
    elif len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    unsplit, split_dir = Path(argv[0]), Path(argv[1])
    schema = json.loads((split_dir / "schema.json").read_text())
    un = column_bytes(unsplit)
    files = {"fact": column_bytes(split_dir / schema["fact"]["file"])}
    for d in schema["dims"]:
        files[d["table"]] = column_bytes(split_dir / d["file"])
    rows = []
    for c in schema["columns"]:
        rows.append(
            {
                "column": c["name"],
                "table": c["table"],
                "unsplit_bytes": un.get(c["name"], 0),
                "split_bytes": files[c["table"]].get(c["name"], 0),
            }
        )
    keys = []
    for d in schema["dims"]:
        keys.append(
            {
                "key": d["key"],
                "dim_rows": d["nrows"],
                "columns": d["columns"],
                "fact_key_bytes": files["fact"].get(d["key"], 0),
                "dim_key_bytes": files[d["table"]].get(d["key"], 0),
                "replaced_unsplit_bytes": sum(un.get(c, 0) for c in d["columns"]),
                "dim_value_bytes": sum(files[d["table"]].get(c, 0) for c in d["columns"]),
            }
        )
    obj = {
        "bench": "splitdf-columns",
        "unsplit": str(unsplit),
        "split": str(split_dir),
        "unsplit_file_bytes": unsplit.stat().st_size,
        "split_dir_bytes": sum(f.stat().st_size for f in split_dir.iterdir()),
        "columns": rows,
        "dimensions": keys,
    }
    print(json.dumps(obj))
    if out_file is not None:
        cmd = " ".join([".venv/bin/python", "benches/splitdf/column_sizes.py", *argv])
        obj.update({"command": cmd, "machine": run.machine()})
        with out_file.open("a") as f:
            f.write(json.dumps(obj) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
