"""`attune bench hash-q9`: TPC-H query 9 on skewed data, its hash joins on VIP, chained and
hashbrown tables (``attune-bench hash --mode q9``) and DuckDB running the same query on the same
data, in one run (docs/vip-hashing.md, "TPC-H query 9").

The base tables come from tpchgen-cli (``--scale``, Parquet, generated into ``--tpch`` when the
files are missing). For every ``--seed`` and ``--zipf`` the foreign keys of lineitem are redrawn
with Zipfian skew, as the source's skewed TPC-H does: ``l_partkey`` over the parts and
``l_orderkey`` over the orders, each in its own random popularity order, and ``l_suppkey`` as
one of the part's four partsupp suppliers (uniform), so every lineitem still joins partsupp.
Zipf 0 is uniform. Quantities, prices, discounts and every other table are tpchgen's.

The columns are written as raw files into ``--work`` and the Rust plan runs on them (every table
in one process, rotating order, median of ``--repeat``); DuckDB (``--duckdb-threads``, default 1:
the source's single-threaded mode) loads the same columns into in-memory tables and runs the
text of Q9 ``--repeat`` times (median). Times are CPU seconds of the query (the Rust thread;
DuckDB's process CPU time around ``execute().fetchall()``). Every table and DuckDB must return
the same groups and the same profit sum to the last 1e-4; a difference is an error.

The Rust plan reads ``p_green`` (the ``p_name LIKE '%green%'`` mask, computed here) where DuckDB
evaluates the LIKE itself on 200,000 names per scale unit; everything else is inside both
timings.

Rows (JSON lines, ``--out`` appends; every row has ``command`` and ``machine``): one per table
and setting, ``table`` in vip / chained / hashbrown / duckdb, ``queries_per_sec`` = 1 /
``cpu_seconds``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from attune.bench import BenchError

#: The tables Q9 reads.
TABLES = ("lineitem", "orders", "part", "partsupp", "supplier", "nation")

#: TPC-H query 9, as the specification writes it.
Q9 = """
select nation, o_year, sum(amount) as sum_profit
from (
  select n_name as nation, extract(year from o_orderdate) as o_year,
         l_extendedprice * (1 - l_discount) - ps_supplycost * l_quantity as amount
  from part, supplier, lineitem, partsupp, orders, nation
  where s_suppkey = l_suppkey and ps_suppkey = l_suppkey and ps_partkey = l_partkey
    and p_partkey = l_partkey and o_orderkey = l_orderkey and s_nationkey = n_nationkey
    and p_name like '%green%'
) as profit
group by nation, o_year
order by nation, o_year desc
"""


def add_parser(verbs) -> None:
    from attune.cli import add_output_flags

    p = verbs.add_parser(
        "hash-q9",
        help="TPC-H Q9 on skewed data: VIP / chained / hashbrown hash joins and DuckDB",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor (1)")
    p.add_argument(
        "--tpch",
        default="/var/tmp/attune-tpch",
        help="directory of tpchgen-cli's Parquet files; generated when missing",
    )
    p.add_argument(
        "--work",
        default="/var/tmp/attune-q9",
        help="directory for the skewed column files (rewritten per setting)",
    )
    p.add_argument("--zipf", default="0,0.5,1,1.5", help="skew of the foreign keys (0,0.5,1,1.5)")
    p.add_argument("--seed", default="1", help="seeds, comma separated (1)")
    p.add_argument("--repeat", type=int, default=3, help="runs per table; median (3)")
    p.add_argument("--tables", default="vip,chained,hashbrown", help="Rust tables")
    p.add_argument("--no-duckdb", action="store_true", help="skip DuckDB")
    p.add_argument("--duckdb-threads", type=int, default=1, help="DuckDB threads (1)")
    add_output_flags(p, out="append the JSON rows to PATH")
    p.set_defaults(func=run)


def _floats(flag: str, text: str) -> list[float]:
    from attune.errors import InvalidArgumentError

    try:
        vals = [float(x) for x in text.split(",")]
    except ValueError:
        raise InvalidArgumentError(f"{flag}: not a comma list of numbers: {text!r}") from None
    if any(not (0 <= v <= 5) for v in vals):
        raise InvalidArgumentError(f"{flag}: values must be in [0, 5], got {text!r}")
    return vals


def _ints(flag: str, text: str) -> list[int]:
    from attune.errors import InvalidArgumentError

    try:
        vals = [int(x) for x in text.split(",")]
    except ValueError:
        raise InvalidArgumentError(f"{flag}: not a comma list of integers: {text!r}") from None
    if any(v < 0 for v in vals):
        raise InvalidArgumentError(f"{flag}: seeds must be >= 0")
    return vals


def ensure_tpch(directory: Path, scale: float) -> None:
    """Generates the Q9 tables with tpchgen-cli into ``directory`` unless all are there."""
    if all((directory / f"{t}.parquet").is_file() for t in TABLES):
        return
    exe = Path(sys.executable).parent / "tpchgen-cli"
    cmd = [
        str(exe) if exe.is_file() else "tpchgen-cli",
        "parquet",
        "-s",
        f"{scale:g}",
        "--tables",
        ",".join(TABLES),
        "--output-dir",
        str(directory),
    ]
    directory.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run(cmd, check=True, capture_output=True, text=True)
    except FileNotFoundError:
        raise BenchError("tpchgen-cli is not installed (pip install tpchgen-cli)") from None
    except subprocess.CalledProcessError as exc:
        raise BenchError(f"tpchgen-cli failed: {exc.stderr.strip()}") from None


def _cents(col) -> np.ndarray:
    """A DECIMAL(15,2) column as int64 cents (exact: values stay far below 2^53 / 100)."""
    return np.rint(col.to_numpy().astype(np.float64) * 100).astype(np.int64)


def load_base(directory: Path) -> dict:
    """The tpchgen tables Q9 reads, as Arrow tables plus the numpy columns of the Rust plan."""
    import pyarrow.parquet as pq

    def read(name, cols):
        path = directory / f"{name}.parquet"
        try:
            return pq.read_table(path, columns=cols)
        except (OSError, ValueError, KeyError) as exc:  # ArrowInvalid is a ValueError
            raise BenchError(f"{path}: cannot read the columns {cols}: {exc}") from None

    base = {
        "lineitem": read(
            "lineitem",
            ["l_orderkey", "l_partkey", "l_suppkey", "l_quantity", "l_extendedprice", "l_discount"],
        ),
        "orders": read("orders", ["o_orderkey", "o_orderdate"]),
        "part": read("part", ["p_partkey", "p_name"]),
        "partsupp": read("partsupp", ["ps_partkey", "ps_suppkey", "ps_supplycost"]),
        "supplier": read("supplier", ["s_suppkey", "s_nationkey"]),
        "nation": read("nation", ["n_nationkey", "n_name"]),
    }
    part = base["part"]
    p_partkey = part["p_partkey"].to_numpy().astype(np.uint64)
    if not np.array_equal(p_partkey, np.arange(1, len(p_partkey) + 1, dtype=np.uint64)):
        raise BenchError(f"{directory}/part.parquet: p_partkey is not 1..{len(p_partkey)}")
    ps = base["partsupp"]
    ps_partkey = ps["ps_partkey"].to_numpy().astype(np.uint64)
    ps_suppkey = ps["ps_suppkey"].to_numpy().astype(np.uint64)
    order = np.argsort(ps_partkey, kind="stable")
    if len(ps_partkey) != 4 * len(p_partkey) or not np.array_equal(
        ps_partkey[order], np.repeat(p_partkey, 4)
    ):
        raise BenchError(f"{directory}/partsupp.parquet: not four suppliers per part")
    years = base["orders"]["o_orderdate"].to_numpy().astype("datetime64[Y]").astype(np.int64) + 1970
    cols = {
        "p_partkey.u64": p_partkey,
        "p_green.u8": np.array(
            ["green" in name for name in part["p_name"].to_pylist()], dtype=np.uint8
        ),
        "ps_partkey.u64": ps_partkey,
        "ps_suppkey.u64": ps_suppkey,
        "ps_supplycost.i64": _cents(ps["ps_supplycost"]),
        "s_suppkey.u64": base["supplier"]["s_suppkey"].to_numpy().astype(np.uint64),
        "s_nationkey.u64": base["supplier"]["s_nationkey"].to_numpy().astype(np.uint64),
        "n_nationkey.u64": base["nation"]["n_nationkey"].to_numpy().astype(np.uint64),
        "o_orderkey.u64": base["orders"]["o_orderkey"].to_numpy().astype(np.uint64),
        "o_year.u64": years.astype(np.uint64),
        "l_quantity.i64": _cents(base["lineitem"]["l_quantity"]),
        "l_extendedprice.i64": _cents(base["lineitem"]["l_extendedprice"]),
        "l_discount.i64": _cents(base["lineitem"]["l_discount"]),
    }
    return {"arrow": base, "cols": cols, "supp4": ps_suppkey[order].reshape(-1, 4)}


def zipf_ranks(rng: np.random.Generator, n: int, theta: float, m: int) -> np.ndarray:
    """``m`` draws of ranks in [0, n) with P(rank i) proportional to 1 / (i + 1)^theta."""
    if theta == 0:
        return rng.integers(0, n, size=m)
    w = 1.0 / np.power(np.arange(1, n + 1, dtype=np.float64), theta)
    cdf = np.cumsum(w)
    cdf /= cdf[-1]
    return np.minimum(np.searchsorted(cdf, rng.random(m), side="right"), n - 1)


def skew_lineitem(base: dict, theta: float, seed: int) -> dict[str, np.ndarray]:
    """Redraws lineitem's foreign keys with Zipfian skew ``theta`` (see the module doc)."""
    rng = np.random.default_rng(seed)
    cols = base["cols"]
    m = len(cols["l_quantity.i64"])
    parts, orders = cols["p_partkey.u64"], cols["o_orderkey.u64"]
    part_by_rank = rng.permutation(parts)
    order_by_rank = rng.permutation(orders)
    l_partkey = part_by_rank[zipf_ranks(rng, len(parts), theta, m)]
    l_suppkey = base["supp4"][(l_partkey - 1).astype(np.int64), rng.integers(0, 4, size=m)]
    l_orderkey = order_by_rank[zipf_ranks(rng, len(orders), theta, m)]
    return {
        "l_partkey.u64": l_partkey.astype(np.uint64),
        "l_suppkey.u64": l_suppkey.astype(np.uint64),
        "l_orderkey.u64": l_orderkey.astype(np.uint64),
    }


def write_columns(work: Path, cols: dict[str, np.ndarray]) -> None:
    work.mkdir(parents=True, exist_ok=True)
    for name, arr in cols.items():
        dtype = {"u64": "<u8", "i64": "<i8", "u8": "u1"}[name.rsplit(".", 1)[1]]
        arr.astype(dtype).tofile(work / name)


def _run_rust(args, work: Path, theta: float, seed: int) -> list[dict]:
    from attune.bench import find_binary

    cmd = [str(find_binary()), "hash", "--mode", "q9", "--data", str(work), "--json"]
    cmd += ["--tables", args.tables, "--zipf", f"{theta:g}", "--seed", str(seed)]
    cmd += ["--repeat", str(args.repeat)]
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as exc:
        raise BenchError(f"{shlex.join(cmd)} failed: {exc.stderr.strip()}") from None
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def _run_duckdb(args, base: dict, skewed: dict, theta: float, seed: int) -> dict:
    import duckdb
    import pyarrow as pa

    arrow = base["arrow"]
    li = arrow["lineitem"]
    li = li.set_column(0, "l_orderkey", pa.array(skewed["l_orderkey.u64"].astype(np.int64)))
    li = li.set_column(1, "l_partkey", pa.array(skewed["l_partkey.u64"].astype(np.int64)))
    li = li.set_column(2, "l_suppkey", pa.array(skewed["l_suppkey.u64"].astype(np.int64)))
    con = duckdb.connect()
    con.execute(f"SET threads = {int(args.duckdb_threads)}")
    for name in TABLES:
        src = li if name == "lineitem" else arrow[name]
        con.register(f"src_{name}", src)
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM src_{name}")
        con.unregister(f"src_{name}")
    cpu, wall, result = [], [], None
    for _ in range(args.repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        result = con.execute(Q9).fetchall()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    con.close()
    assert result is not None
    profit_e4 = int(sum(r[2] for r in result) * 10000)
    c = statistics.median_low(cpu)
    return {
        "table": "duckdb",
        "mode": "q9",
        "query": "tpch-q9",
        "zipf": theta,
        "seed": seed,
        "lineitem_rows": len(li),
        "cpu_seconds": c,
        "wall_seconds": statistics.median_low(wall),
        "queries_per_sec": 1.0 / c,
        "profit_e4": profit_e4,
        "groups": len(result),
        "duckdb_version": duckdb.__version__,
        "duckdb_threads": int(args.duckdb_threads),
        "repeat": args.repeat,
    }


def run(args) -> int:
    from attune.bench import machine
    from attune.cli import progress
    from attune.errors import InvalidArgumentError

    zipfs = _floats("--zipf", args.zipf)
    seeds = _ints("--seed", args.seed)
    if not 1 <= args.repeat <= 99:
        raise InvalidArgumentError("--repeat must be in [1, 99]")
    if not 0 < args.scale <= 10:
        raise InvalidArgumentError("--scale must be in (0, 10]")
    if not 1 <= args.duckdb_threads <= 256:
        raise InvalidArgumentError("--duckdb-threads must be in [1, 256]")
    command = "attune bench hash-q9 " + shlex.join(sys.argv[3:])
    tpch, work = Path(args.tpch), Path(args.work)
    ensure_tpch(tpch, args.scale)
    base = load_base(tpch)
    write_columns(work, base["cols"])
    mach = machine()
    rows: list[dict] = []
    settings = [(s, z) for s in seeds for z in zipfs]
    with progress(args, total=len(settings), desc="q9", unit="setting") as bar:
        for seed, theta in settings:
            skewed = skew_lineitem(base, theta, seed)
            write_columns(work, skewed)
            found = _run_rust(args, work, theta, seed)
            if not args.no_duckdb:
                duck = _run_duckdb(args, base, skewed, theta, seed)
                for r in found:
                    if (r["profit_e4"], r["groups"]) != (duck["profit_e4"], duck["groups"]):
                        raise BenchError(
                            f"zipf {theta:g} seed {seed}: {r['table']} returned "
                            f"{r['profit_e4']} over {r['groups']} groups, DuckDB "
                            f"{duck['profit_e4']} over {duck['groups']}"
                        )
                    r["speedup_vs_duckdb"] = duck["cpu_seconds"] / r["cpu_seconds"]
                found.append(duck)
            for r in found:
                r["scale"] = args.scale
                r["command"] = command
                r["machine"] = mach
            rows += found
            bar.update(1)
    lines = [json.dumps(r) for r in rows]
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("a") as f:
            f.write("\n".join(lines) + "\n")
    if args.json:
        print("\n".join(lines))
        return 0
    for r in rows:
        print(
            f"zipf={r['zipf']:<4g} seed={r['seed']} {r['table']:9} "
            f"{r['cpu_seconds']:.3f} s cpu  vs_chained="
            + (f"{r['speedup_vs_chained']:.3f}" if r.get("speedup_vs_chained") else "-")
        )
    return 0
