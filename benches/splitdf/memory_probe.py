"""What holds a notebook process's peak memory? Peak RSS after each phase, split vs unsplit.

For one data set, runs three fresh processes, each loading the data into DuckDB as the notebook
benchmark does (``run.py``), then running the warm-up query and every notebook step five times:

- ``unsplit, ibis``: steps run with Ibis's ``to_pyarrow()`` (the earlier benchmark harness);
- ``unsplit, direct``: steps run like ``SplitFrame.to_pyarrow`` (memoized SQL on the DuckDB
  connection, cast to Ibis's schema; ``run.py``'s ``_direct_runner``);
- ``split, direct``: ``SplitFrame.to_pyarrow`` on the split.

Each process reports its peak RSS (VmHWM, MiB) after the imports, after loading, after the
warm-up query and after each step, and DuckDB's own count of the bytes its in-memory tables
take (``duckdb_memory()``, tag ``IN_MEMORY_TABLE``).

Usage: .venv/bin/python benches/splitdf/memory_probe.py DATASET UNSPLIT.parquet SPLIT_DIR
           [--out FILE]
Prints one JSON line per process; with --out also appends them (with `command` and `machine`).
Thread-safety: a script; each child has one DuckDB connection.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))

import run  # notebook steps, vmhwm(), machine(), _direct_runner()

MIB = 2**20


def child(dataset: str, mode: str, path: str, bits: int) -> None:
    import ibis

    from attune import frames

    phases = {"imports": run.vmhwm() / MIB}
    if mode == "split":
        sf = frames.connect(path, load="table", name="data")
        con, t, execute = sf.con, sf.table, sf.to_pyarrow
    else:
        con = ibis.duckdb.connect()
        con.raw_sql(f"SET perfect_ht_threshold = {max(bits, 12)}")
        con.raw_sql(f"CREATE TEMP TABLE data AS SELECT * FROM read_parquet('{path}')")
        t = con.table("data")
        if mode == "unsplit-ibis":

            def execute(e):
                return e.to_pyarrow() if hasattr(e, "schema") else e.as_table().to_pyarrow()

        else:
            execute = run._direct_runner(con)
    phases["load"] = run.vmhwm() / MIB
    (table_bytes,) = con.con.execute(
        "SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory() "
        "WHERE tag = 'IN_MEMORY_TABLE'"
    ).fetchall()[0]
    execute(t.select(t.columns[0]).limit(1))
    phases["warm-up"] = run.vmhwm() / MIB
    for name, expr in run.notebook(dataset, t):
        for _ in range(run.REPEATS):
            execute(expr)
        phases[name] = run.vmhwm() / MIB
    print(json.dumps({"mode": mode, "table_mib": table_bytes / MIB, "peak_mib": phases}))


def main(argv: list[str]) -> int:
    if argv and argv[0] == "_child":
        child(argv[1], argv[2], argv[3], int(argv[4]))
        return 0
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    dataset, unsplit, split_dir = argv[0], argv[1], argv[2]
    out = argv[argv.index("--out") + 1] if "--out" in argv else None
    from attune.frames.splitdf import perfect_ht_bits, read_schema

    bits = str(perfect_ht_bits(read_schema(split_dir)))
    command = " ".join(
        shlex.quote(a) for a in ["attune", "bench", "splitdf", "memory-probe"] + argv
    )
    for mode, path in (
        ("unsplit-ibis", unsplit),
        ("unsplit-direct", unsplit),
        ("split", split_dir),
    ):
        p = subprocess.run(
            [sys.executable, str(HERE), "_child", dataset, mode, path, bits],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        )
        row = {
            "bench": "splitdf-memory",
            "dataset": dataset,
            "unsplit": unsplit,
            "split": split_dir,
            **json.loads(p.stdout.strip().splitlines()[-1]),
        }
        print(json.dumps(row), flush=True)
        if out:
            with open(out, "a") as f:
                f.write(json.dumps({**row, "command": command, "machine": run.machine()}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
