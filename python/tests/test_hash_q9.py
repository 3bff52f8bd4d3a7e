"""`attune bench hash-q9`: the skew generator, the answer check against DuckDB, and the errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from attune.bench import hash_q9


def test_zipf_ranks_are_in_range_and_skewed():
    rng = np.random.default_rng(7)
    flat = hash_q9.zipf_ranks(rng, 1000, 0.0, 100_000)
    hot = hash_q9.zipf_ranks(rng, 1000, 1.5, 100_000)
    assert flat.min() >= 0 and flat.max() < 1000 and hot.min() >= 0 and hot.max() < 1000
    # Rank 0 takes about 1/zeta(1.5) ~ 38 % of draws at theta 1.5, 0.1 % when flat.
    assert (hot == 0).mean() > 0.3
    assert (flat == 0).mean() < 0.01


def _base(parts=50, orders=40, lines=500):
    supp4 = np.array([[(p + i * 3) % 10 + 1 for i in range(4)] for p in range(1, parts + 1)])
    return {
        "cols": {
            "p_partkey.u64": np.arange(1, parts + 1, dtype=np.uint64),
            "o_orderkey.u64": np.arange(1, 4 * orders + 1, 4, dtype=np.uint64),
            "l_quantity.i64": np.ones(lines, dtype=np.int64),
        },
        "supp4": supp4.astype(np.uint64),
    }


def test_skewed_lineitem_keeps_every_foreign_key_valid_and_is_seeded():
    base = _base()
    a = hash_q9.skew_lineitem(base, 1.0, seed=3)
    b = hash_q9.skew_lineitem(base, 1.0, seed=3)
    for k in a:
        assert np.array_equal(a[k], b[k])
    assert set(a["l_orderkey.u64"]) <= set(base["cols"]["o_orderkey.u64"])
    parts = a["l_partkey.u64"].astype(np.int64)
    assert parts.min() >= 1 and parts.max() <= 50
    for p, s in zip(parts, a["l_suppkey.u64"]):
        assert s in base["supp4"][p - 1]


def test_bad_options_are_attune_errors():
    from attune.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError):
        hash_q9._floats("--zipf", "1,x")
    with pytest.raises(InvalidArgumentError):
        hash_q9._floats("--zipf", "9")
    with pytest.raises(InvalidArgumentError):
        hash_q9._ints("--seed", "-1")


def test_unreadable_tpch_directory_is_a_bench_error(tmp_path):
    from attune.bench import BenchError

    for t in hash_q9.TABLES:
        (tmp_path / f"{t}.parquet").write_bytes(b"not parquet")
    with pytest.raises(BenchError, match="cannot read"):
        hash_q9.load_base(tmp_path)


def test_end_to_end_at_a_tiny_scale_every_table_matches_duckdb(tmp_path):
    pytest.importorskip("duckdb")
    from attune.bench import BenchError, find_binary

    try:
        find_binary()
    except BenchError:
        pytest.skip("attune-bench is not built")
    if shutil.which("tpchgen-cli") is None and not (
        (__import__("pathlib").Path(sys.executable).parent / "tpchgen-cli").is_file()
    ):
        pytest.skip("tpchgen-cli is not installed")
    out = subprocess.run(
        [sys.executable, "-m", "attune.cli", "bench", "hash-q9", "--scale", "0.01"]
        + ["--tpch", str(tmp_path / "tpch"), "--work", str(tmp_path / "work")]
        + ["--zipf", "0,1.5", "--repeat", "1", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    if "q9" in out.stderr and ("unknown mode" in out.stderr or "unknown option" in out.stderr):
        pytest.skip("the attune-bench found predates --mode q9")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert {r["table"] for r in rows} == {"vip", "chained", "hashbrown", "duckdb"}
    for z in (0.0, 1.5):
        answers = {(r["profit_e4"], r["groups"]) for r in rows if r["zipf"] == z}
        assert len(answers) == 1
        (profit, groups) = answers.pop()
        assert groups > 0 and profit != 0
