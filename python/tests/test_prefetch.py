"""TinFetch and the block prefetchers through the Python front (attune.io.prefetch) and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import attune
from attune.io import prefetch as pf


@pytest.fixture(scope="module")
def model() -> bytes:
    x, y = pf.synthetic_sequences(20_000, seed=3)
    return pf.train(x, y, epochs=3, seed=3).to_bytes()


def test_disentangled_readahead_beats_linux_readahead_on_interleaved_streams():
    t = pf.synthetic_trace("seq", 20_000, jobs=8, seed=2)
    res = {m["method"]: m for m in pf.evaluate(t, ["readahead", "tinfetch-no-network"])}
    assert res["tinfetch-no-network"]["score"] > 10 * res["readahead"]["score"]
    assert 0.0 <= res["readahead"]["hit_rate"] <= 1.0


def test_every_variant_runs_and_per_stream_depth_cuts_late_prefetches(model):
    t = pf.synthetic_trace("seq", 20_000, jobs=8, seed=3)
    res = pf.evaluate(t, list(pf.TINFETCH_VARIANTS), model, measure_from=len(t) // 2)
    by = {m["method"]: m for m in res}
    assert list(by) == list(pf.TINFETCH_VARIANTS)
    # One depth for all streams leaves many more prefetches late than a depth per stream.
    assert by["tinfetch-global-depth"]["late_blocks"] > 3 * by["tinfetch"]["late_blocks"]
    assert by["tinfetch"]["score"] > by["tinfetch-global-depth"]["score"]
    assert by["tinfetch"]["score"] > by["tinfetch-static"]["score"]


def test_no_prefetching_loads_the_device_exactly_once():
    t = pf.synthetic_trace("random", 5_000, seed=1)
    (m,) = pf.evaluate(t, ["none"])
    assert m["bandwidth_load"] == 1.0 and m["hit_rate"] == 0.0


def test_the_network_learns_strides_and_rust_agrees_with_numpy(model):
    x, y = pf.synthetic_sequences(2_000, seed=9)
    rust = pf.predict(model, x)
    last = x[:, -1]
    want = np.clip(last + y, 0, pf.SUFFIXES - 1)
    # Within 128 KB (the prefetch size) for most rows despite the 10 % outliers.
    assert np.mean(np.abs(rust - want) < 128) > 0.6
    m = attune.io.heimdall.model_from_bytes(model)
    floats = np.clip(last + m.logits(x) * pf.DELTA_RANGE, 0, pf.SUFFIXES - 1)
    assert np.median(np.abs(floats - rust)) <= 8


def test_samples_come_from_the_rust_stream_table():
    t = pf.synthetic_trace("stride", 5_000, jobs=4, seed=0)
    x, y = pf.samples(t)
    assert x.shape[1] == pf.HISTORY and len(x) == len(y) > 1000
    assert np.all(x[:, -1] >= 0) and np.all(x[:, -1] < pf.SUFFIXES)


def test_the_lstm_baseline_predicts_on_the_test_half():
    t = pf.synthetic_trace("seq", 4_000, jobs=1, seed=0)
    p = pf.lstm_predictions(t, epochs=1)
    assert len(p) == len(t) and (p[len(t) // 2 :] >= 0).mean() > 0.9
    res = pf.evaluate(t, [], measure_from=len(t) // 2, predictions=p)
    assert res[0]["method"] == "lstm"


def test_bad_methods_models_and_files_raise_catchable_errors(tmp_path, model):
    t = pf.synthetic_trace("seq", 100)
    with pytest.raises(attune.InvalidArgumentError, match="unknown prefetch method"):
        pf.evaluate(t, ["belady"])
    with pytest.raises(attune.InvalidArgumentError, match="no model"):
        pf.evaluate(t, ["tinfetch"])
    damaged = bytearray(model)
    damaged[40] ^= 0xFF
    p = tmp_path / "m.bin"
    p.write_bytes(bytes(damaged))
    with pytest.raises(attune.CorruptionError):
        pf.load_model(p)
    with pytest.raises(attune.InvalidArgumentError, match="missing.bin"):
        pf.load_model(tmp_path / "missing.bin")
    rng = np.random.default_rng(0)
    for _ in range(200):
        d = bytearray(model)
        d[int(rng.integers(len(d)))] ^= int(rng.integers(1, 256))
        with pytest.raises(attune.Error):
            pf.evaluate(t, ["tinfetch"], bytes(d))


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "attune.cli", *args], capture_output=True, text=True, check=False
    )


def test_cli_eval_prints_every_method_as_json(tmp_path, model):
    trace = tmp_path / "t.trace"
    rows = [f"{i * 0.5:.3f} 0 {(i % 97) * 65536 + (i // 97) * 4096} 4096 1" for i in range(3000)]
    trace.write_text("\n".join(rows) + "\n")
    mp = tmp_path / "m.bin"
    mp.write_bytes(model)
    r = _cli("io", "prefetch", "eval", str(trace), "--model", str(mp), "--json", "--no-lstm")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    names = {m["method"] for m in out["methods"]}
    assert {"readahead", "markov", "leap", "stride", "tinfetch"} <= names


def test_cli_reports_a_malformed_trace_cleanly(tmp_path):
    trace = tmp_path / "bad.trace"
    trace.write_text("0.0 0 4096 4096 1\nnot a line\n")
    r = _cli("io", "prefetch", "eval", str(trace), "--no-lstm", "--synthetic-rows", "100")
    assert r.returncode != 0
    assert "line 2" in r.stderr and "Traceback" not in r.stderr


def _scan_all(db: attune.DB, n: int) -> None:
    for start in range(0, n - 40, 60):
        lo, hi = start.to_bytes(8, "big"), (start + 30).to_bytes(8, "big")
        rows = list(db.items(start=lo, end=hi))
        assert [int.from_bytes(k, "big") for k, _ in rows] == list(range(start, start + 30))
        assert all(v[:8] == k for k, v in rows)


def test_db_prefetcher_option_settings_return_the_same_data(tmp_path, model):
    n = 600
    path = str(tmp_path / "db")
    with attune.DB(path, prefetcher="off") as db:
        for i in range(n):
            k = i.to_bytes(8, "big")
            db.put(k, k + bytes(4088))
    mfile = tmp_path / "tinfetch.bin"
    mfile.write_bytes(model)
    for setting in (
        {"prefetcher": "off"},
        {"prefetcher": "fixed"},
        {"prefetcher": "tinfetch"},
        {"prefetcher": "tinfetch", "prefetch_model": str(mfile)},
    ):
        with attune.DB(path, **setting) as db:
            _scan_all(db, n)
            st = db.stats()
            assert st["options"]["prefetcher"] == setting["prefetcher"]
            p = st["prefetch"]
            if setting["prefetcher"] != "tinfetch":
                assert p["hint_values"] == 0
            assert p["hint_used_bytes"] <= p["hint_bytes"]
            assert p["block_used_bytes"] <= p["block_bytes"]


def test_db_prefetcher_errors_name_what_is_wrong(tmp_path):
    path = str(tmp_path / "db")
    with pytest.raises(attune.InvalidArgumentError, match="off, fixed, tinfetch"):
        attune.DB(path, prefetcher="sometimes")
    missing = tmp_path / "missing.bin"
    with pytest.raises(attune.InvalidArgumentError, match="missing.bin"):
        attune.DB(path, prefetcher="tinfetch", prefetch_model=str(missing))
    damaged = tmp_path / "damaged.bin"
    damaged.write_bytes(b"ATIOMLP1" + b"\x01\x00" + bytes(58))  # version 1, then zeros
    with pytest.raises(attune.CorruptionError, match="damaged.bin"):
        attune.DB(path, prefetcher="tinfetch", prefetch_model=str(damaged))
    with pytest.raises(attune.InvalidArgumentError, match="prefetcher=tinfetch"):
        attune.DB(path, prefetch_model=str(damaged))
    # Nothing was created by the failed opens.
    assert not (tmp_path / "db").exists()
