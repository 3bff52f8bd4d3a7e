"""EVProx (surrogate keys), the numpy DLRM and the calibrated Criteo-like generator."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attune import workload
from attune.cli import main
from attune.embed import EmbeddingStore, load_table, surrogates
from attune.embed.dlrm import DLRM, pr_auc
from attune.errors import InvalidArgumentError, WorkloadError


def test_surrogate_is_the_most_accessed_of_the_nearest():
    # Points on a line: 0, 1, 2, ..., 9. Row 0's 3 nearest are 1, 2, 3; 3 is the most accessed.
    values = np.arange(10, dtype=np.float32)[:, None] * np.ones((1, 2), dtype=np.float32)
    counts = np.array([0, 1, 2, 50, 0, 0, 0, 0, 0, 100])
    s = surrogates(values, counts, k=3)
    assert s[0] == 3
    assert s[9] == 6 or counts[s[9]] == max(counts[[6, 7, 8]])
    assert all(s[i] != i for i in range(10))
    # Ties in popularity go to the nearer row.
    flat = surrogates(values, np.zeros(10), k=3)
    assert flat[0] == 1 and flat[5] in (4, 6)


def test_cosine_ignores_length():
    values = np.array([[1, 0], [10, 0.5], [0, 1], [0.1, 0]], dtype=np.float32)
    counts = np.zeros(4)
    assert surrogates(values, counts, k=1, metric="cosine")[0] == 3
    assert surrogates(values, counts, k=1, metric="euclidean")[0] == 3
    assert surrogates(values, counts, k=1, metric="cosine")[1] in (0, 3)


def test_surrogates_bad_input():
    with pytest.raises(InvalidArgumentError, match="one entry per row"):
        surrogates(np.zeros((3, 2)), np.zeros(2))
    with pytest.raises(InvalidArgumentError, match="metric"):
        surrogates(np.zeros((3, 2)), np.zeros(3), metric="manhattan")
    with pytest.raises(InvalidArgumentError, match="finite"):
        surrogates(np.array([[np.nan, 0], [0, 0]]), np.zeros(2))
    assert list(surrogates(np.zeros((1, 2)), np.zeros(1))) == [-1]


def test_store_serves_a_resident_surrogate(tmp_path):
    rows = np.arange(20 * 2, dtype=np.float32).reshape(20, 2) / 100
    load_table(tmp_path, "C1", rows)
    mapping = np.full(20, 5)
    mapping[5] = -1
    # 128 B: half to L3 (2 mappings), 8 fp32 rows of dim 2 for L1.
    with EmbeddingStore(
        tmp_path,
        tables=["C1"],
        cache_bytes=128,
        policy="lru",
        surrogates={"C1": mapping},
        l3_share=0.5,
    ) as s:
        assert s.capacity == (8, 0) and s.l3_capacity == 2
        for k in range(9):
            s.lookup([[k]])
        out = s.lookup([[0]])
        np.testing.assert_array_equal(out[0, 0], rows[5])
        st = s.stats()
        assert st["l3_hits"] == 1 and st["perfect_approx"] == 1 and st["perfect"] == 0
        with pytest.raises(InvalidArgumentError, match="unknown table"):
            s.set_surrogates("C9", mapping)
        with pytest.raises(InvalidArgumentError, match="one entry per row"):
            s.set_surrogates("C1", mapping[:5])
        with pytest.raises(InvalidArgumentError, match="out of range"):
            s.set_surrogates(0, np.full(20, 20))
        with pytest.raises(InvalidArgumentError, match="1-D integer"):
            s.set_surrogates(0, np.zeros(20))


def test_store_without_surrogates_has_no_l3(tmp_path):
    load_table(tmp_path, "C1", np.zeros((10, 2), dtype=np.float32))
    with EmbeddingStore(tmp_path, tables=1, cache_bytes=1024) as s:
        assert s.l3_capacity == 0
        s.lookup([[1], [2]])
        assert s.stats()["l3_hits"] == 0
    with pytest.raises(InvalidArgumentError, match="l3_share"):
        EmbeddingStore(tmp_path, tables=1, cache_bytes=1024, l3_share=0.9)


def test_pr_auc_known_values():
    assert pr_auc([1, 0, 1, 0], [0.9, 0.8, 0.7, 0.1]) == pytest.approx((1 + 2 / 3) / 2)
    assert pr_auc([1, 1, 0], [0.5, 0.4, 0.1]) == 1.0
    with pytest.raises(InvalidArgumentError, match="positive"):
        pr_auc([0, 0], [0.1, 0.2])


def test_dlrm_learns_the_generators_clicks():
    g = workload.criteo(24_000, tables=8, scale=0.0005, seed=3, profile="kaggle")
    cards = [int(c) for c in g["cardinalities"]]
    m = DLRM(cards, dim=8, bottom=16, top=16, seed=1)
    tr, te = slice(0, 20_000), slice(20_000, 24_000)
    before = pr_auc(g["clicks"][te], m.predict(g["dense"][te], m.lookup(g["keys"][te])))
    losses = m.train(g["keys"][tr], g["dense"][tr], g["clicks"][tr], epochs=2)
    assert losses[1] < losses[0]
    after = pr_auc(g["clicks"][te], m.predict(g["dense"][te], m.lookup(g["keys"][te])))
    base = float(np.mean(g["clicks"][te]))
    assert after > before and after > base + 0.03, (before, after, base)
    assert all(np.abs(e).max() <= 1.0 for e in m.embeddings)
    with pytest.raises(InvalidArgumentError, match="embeddings must be"):
        m.predict(g["dense"][:2], np.zeros((2, 3, 8)))


def test_kaggle_profile_is_less_cacheable_and_clicks_like_criteo():
    kw = {"tables": 26, "scale": 0.001, "seed": 2}
    k = workload.criteo(30_000, profile="kaggle", **kw)
    z = workload.criteo(30_000, profile="zipf", **kw)
    assert abs(float(np.mean(k["clicks"])) - 0.2562) < 0.02
    # The big table C3 repeats its keys far less in the calibrated profile.
    assert len(np.unique(k["keys"][:, 2])) > 1.5 * len(np.unique(z["keys"][:, 2]))
    with pytest.raises(WorkloadError, match="profile"):
        workload.criteo(10, profile="avazu")


def test_bench_evstore_accuracy_runs_small(tmp_path):
    out = tmp_path / "r.jsonl"
    rc = main(
        [
            "bench",
            "evstore",
            "--mode",
            "accuracy",
            "--scale",
            "0.0001",
            "--train",
            "3000",
            "--warm",
            "500",
            "--test",
            "1000",
            "--out",
            str(out),
            "--json",
        ]
    )
    assert rc == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    by = {x["config"]: x for x in rows}
    assert by["fp32-all"]["pr_auc"] == pytest.approx(by["exact"]["pr_auc"])
    assert "int8+int4-5%+prox" in by and by["int4-all"]["clipped"] >= 0


def test_bench_evstore_sla_runs_small(tmp_path, capsys):
    out = tmp_path / "sla.jsonl"
    args = ["bench", "evstore", "--mode", "sla", "--scale", "0.0001", "--warm", "500"]
    args += [
        "--test",
        "20",
        "--fractions",
        "0.05,0.5",
        "--configs",
        "none,pagecache,lru,ev-lfu@8+4",
    ]
    assert main([*args, "--out", str(out), "--json"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    configs = ["none", "pagecache", "lru", "lru", "ev-lfu@8+4", "ev-lfu@8+4"]
    assert [r["config"] for r in rows] == configs
    by = {(r["config"], r["cache_fraction"]): r for r in rows}
    assert by[("none", 0.0)]["misses_per_request"] == 26
    assert by[("pagecache", 1.0)]["precisions"] == [32]
    assert by[("ev-lfu@8+4", 0.5)]["precisions"] == [8, 4]
    assert all(r["p50_us"] <= r["p99_us"] and "meets_sla" in r for r in rows)
    assert main(["bench", "evstore", "--mode", "sla", "--configs", "lru@x"]) != 0
    assert "--configs: cannot parse `lru@x`" in capsys.readouterr().err


def test_bench_evstore_backends_runs_small(tmp_path, capsys):
    out = tmp_path / "backends.jsonl"
    args = ["bench", "evstore", "--mode", "backends", "--scale", "0.0001", "--warm", "300"]
    args += ["--test", "20", "--fractions", "0.05"]
    assert main([*args, "--out", str(out), "--json"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["config"] for r in rows] == ["file-warm", "kv-warm", "file-cold", "kv-cold"]
    by = {(r["backend"], r["page_cache"]): r for r in rows}
    for pc in ("warm", "cold"):
        # Same policy, same stream: the back end changes where misses are read, not which.
        assert by[("kv", pc)]["perfect_rate"] == by[("file", pc)]["perfect_rate"]
        assert by[("kv", pc)]["misses_per_request"] == by[("file", pc)]["misses_per_request"]
        assert by[("kv", pc)]["mean_us_over_file"] > 0
    assert main([*args, "--backends", "file,tape"]) != 0
    assert "unknown backend `tape`" in capsys.readouterr().err


def test_bench_evstore_ceiling_bounds_the_online_policy(tmp_path):
    out = tmp_path / "ceiling.jsonl"
    args = ["bench", "evstore", "--mode", "ceiling", "--scale", "0.0005", "--warm", "500"]
    args += ["--test", "2000", "--fractions", "0.05,0.2", "--policy", "clockpro"]
    assert main(args + ["--configs", "lru", "--no-progress", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["cache_fraction"] for r in rows] == [0.05, 0.2]
    for r in rows:
        limit = 1 - r["first_reference_rate"] + 1e-9
        assert r["oracle_top_perfect"] <= limit and r["oracle_group_perfect"] <= limit
        assert r["clockpro_perfect"] <= limit
        assert "clockpro_perfect" in r and "lru_perfect" in r
