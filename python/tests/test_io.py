"""attune.io: traces, the simulated SSD, Heimdall's pipeline and weight files, routing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import attune
from attune.io import evaluate as ev
from attune.io import heimdall as hd
from attune.io import load_trace, parse_trace, replay, route, ssd_params, synthetic_trace

SAMPLES = Path(__file__).resolve().parents[3] / "shared" / "data" / "traces"
PARAMS = {"gc_every_bytes": 4 << 20}


def test_a_malformed_trace_line_names_its_number():
    with pytest.raises(attune.CorruptionError, match="line 2"):
        parse_trace(b"0.0 0 4096 4096 1\n1.0 0 4096 4096 5\n", "msr")
    with pytest.raises(attune.CorruptionError, match="line 3"):
        parse_trace(b"version,time,op,size,lbn\n1,1,28,512,1\n1,x,28,512,1\n")


def test_a_damaged_gzip_trace_is_a_corruption_error_naming_the_file(tmp_path):
    # Damaged deflate data raised zlib.error, which no attune handler catches; both readers
    # (block traces and the device checker's, which also reads strace logs) share one path now.
    import gzip

    from attune.device.traces import load_io_trace

    data = gzip.compress(b"0,host,0,Read,0,4096,1\n" * 1000)
    p = tmp_path / "msr.csv.gz"
    p.write_bytes(data[:20] + bytes(30) + data[50:])
    for load in (load_trace, load_io_trace):
        with pytest.raises(attune.CorruptionError, match="cannot decompress") as e:
            load(p)
        assert str(p) in str(e.value)


def test_a_gzip_trace_loads(tmp_path):
    import gzip

    p = tmp_path / "t.csv.gz"
    p.write_bytes(gzip.compress(b"version,time,op,size,lbn\n1,5,28,512,1\n1,6,2a,512,2\n"))
    t = load_trace(p)
    assert len(t) == 2 and t.is_read.tolist() == [True, False]
    assert t.timestamp_ns.tolist() == [0, 1_000_000_000]


def test_bad_ssd_parameters_are_named():
    with pytest.raises(attune.InvalidArgumentError, match="stripe_chips"):
        ssd_params({"stripe_chips": 7})
    with pytest.raises(attune.InvalidArgumentError, match="unknown SSD parameter"):
        ssd_params({"chanels": 4})
    assert ssd_params()["channels"] == 8


def test_replay_is_deterministic():
    t = synthetic_trace(2000, seed=3)
    a, b = replay(t, PARAMS, 1), replay(t, PARAMS, 1)
    assert a["latency_ns"] == b["latency_ns"]
    assert a["stats"]["gc_periods"] > 0


def test_labelling_and_filters_follow_the_documented_rule():
    size = np.full(12, 4096.0)
    lat = np.array([100, 100, 100, 900, 800, 950, 100, 100, 100, 700, 100, 100]) * 1e3
    lab = hd.label_periods(size, lat)
    assert lab.tolist() == [0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 0]
    keep = hd.noise_filter(size, lat, lab)
    # Both slow periods are bursts of 3 or fewer reads: stage 3 drops them.
    assert not keep[3:6].any() and not keep[9]
    assert hd.label_cutoff(lat).sum() == 2


def test_roc_auc():
    assert hd.roc_auc(np.array([0, 0, 1, 1]), np.array([0.1, 0.2, 0.8, 0.9])) == 1.0
    assert hd.roc_auc(np.array([0, 1]), np.array([0.5, 0.5])) == 0.5
    assert np.isnan(hd.roc_auc(np.array([1, 1]), np.array([0.1, 0.2])))


def _rows():
    t = synthetic_trace(3000, write_fraction=0.6, iops=30_000, seed=5)
    return hd.read_rows(replay(t, PARAMS, 2), t)


def test_a_trained_model_round_trips_and_rust_agrees(tmp_path):
    rows = _rows()
    m = hd.train(rows, hd.Pipeline(epochs=3))
    assert m.dims == [11, 128, 16, 1]
    p = tmp_path / "m.heimdall"
    m.save(p)
    m2 = hd.load_model(p)
    np.testing.assert_allclose(
        m2.predict_proba(rows["features"]), m.predict_proba(rows["features"]), rtol=1e-5
    )
    q = hd.quantised_scores(p.read_bytes(), rows["features"])
    assert np.abs(q - m.predict_proba(rows["features"])).max() < 0.05


def test_a_live_model_sees_the_reads_in_flight(tmp_path):
    rows = _rows()
    live = rows["live"]
    assert live.shape == (len(rows["size"]), len(hd.LIVE_NAMES))
    # Reads are in flight at some decisions, and the oldest one's age is never negative.
    assert live[:, 2].max() > 0 and live[:, 0].min() >= 0
    assert (live[live[:, 2] == 0, 0] == 0).all()
    m = hd.train(rows, hd.Pipeline(epochs=2, features="live"))
    assert m.dims == [14, 128, 16, 1] and m.kind == hd.KIND_HEIMDALL_LIVE
    data = m.to_bytes()
    assert attune._native.io_model_info(data)["kind"] == "heimdall-live"
    p = tmp_path / "live.heimdall"
    m.save(p)
    assert hd.load_model(p).kind == hd.KIND_HEIMDALL_LIVE
    x = hd.live_features(rows)
    q = hd.quantised_scores(data, x)
    assert np.abs(q - m.predict_proba(x)).max() < 0.05
    # The chapter's 11 inputs are not a live model's 14.
    with pytest.raises(attune.InvalidArgumentError):
        hd.quantised_scores(data, rows["features"])
    a = synthetic_trace(1500, write_fraction=0.7, iops=40_000, seed=1)
    b = synthetic_trace(1500, write_fraction=0.2, iops=5_000, seed=2)
    r = route([a, b], "model-cost", PARAMS, 1, models=[data, data], slow_factor=10.0)
    assert r["inferences"] == 2 * len(r["read_latency_ns"])
    with pytest.raises(attune.InvalidArgumentError, match="features"):
        hd.train(rows, hd.Pipeline(epochs=1, features="psychic"))
    # Probe reads: stale replicas get a small read; clients' reads are unchanged in number.
    p = route([a, b], "model-cost", PARAMS, 1, models=[data, data], probe_reads_us=200.0)
    assert p["probes"] > 0 and r["probes"] == 0
    assert len(p["read_latency_ns"]) == len(r["read_latency_ns"])
    served = sum(int(d["reads"]) for d in p["device_stats"])
    assert served == len(p["read_latency_ns"]) + p["probes"]
    with pytest.raises(attune.InvalidArgumentError, match="probe_reads_us"):
        route([a, b], "c3", PARAMS, 1, probe_reads_us=-1.0)
    with pytest.raises(attune.InvalidArgumentError, match="probe_models"):
        route([a, b], "c3", PARAMS, 1, probe_reads_us=10.0, probe_models=[data, data])


@pytest.mark.parametrize("joint", [3, 9])
def test_joint_models(joint):
    m = hd.train(_rows(), hd.Pipeline(epochs=2, joint=joint))
    assert m.dims[0] == 10 + joint
    assert attune._native.io_model_info(m.to_bytes())["joint"] == joint


def test_a_damaged_weight_file_is_a_clear_error(tmp_path):
    data = bytearray(hd.train(_rows(), hd.Pipeline(epochs=1)).to_bytes())
    data[100] ^= 0xFF
    p = tmp_path / "bad.heimdall"
    p.write_bytes(bytes(data))
    with pytest.raises(attune.CorruptionError, match="checksum"):
        hd.load_model(p)
    p.write_bytes(b"\x80\x04pickle")
    with pytest.raises(attune.CorruptionError, match="bad magic"):
        hd.load_model(p)
    p.write_bytes(bytes(data[:50]))
    with pytest.raises(attune.CorruptionError):
        hd.load_model(p)


def test_routing_policies_and_a_small_evaluation():
    a = synthetic_trace(1500, write_fraction=0.7, iops=40_000, seed=1)
    b = synthetic_trace(1500, write_fraction=0.2, iops=5_000, seed=2)
    r = route([a, b], "random", PARAMS, 1)
    assert len(r["read_latency_ns"]) == int(a.is_read.sum() + b.is_read.sum())
    with pytest.raises(attune.InvalidArgumentError, match="unknown policy"):
        route([a, b], "psychic", PARAMS)
    groups = ev.random_windows([a, b], 1, 1200, 3)
    res = ev.evaluate_pair(groups[0], params=PARAMS, pipeline=hd.Pipeline(epochs=2))
    assert set(res.latency_us) == set(ev.POLICIES)
    assert res.redirected["baseline"] == 0
    s = ev.summarize([res])
    assert "heimdall_mean_reduction_vs_best_baseline_median" in s
    assert "heimdall-cost_mean_reduction_vs_best_baseline_median" in s
    assert ev.best_baseline(res)[0] not in (*ev.HEIMDALL_POLICIES, *ev.BOUND_POLICIES)
    assert sum(res.served_share["c3"]) == pytest.approx(1.0)
    # Probe reads are the devices', not the clients': the shares still sum to 1.
    probing = [p for p in res.served_share if res.probe_share.get(p, 0) > 0]
    assert probing, res.probe_share
    for pol in probing:
        assert sum(res.served_share[pol]) == pytest.approx(1.0), pol


def test_cross_replica_policies_and_the_probe():
    a = synthetic_trace(1500, write_fraction=0.7, iops=40_000, seed=1)
    b = synthetic_trace(1500, write_fraction=0.2, iops=5_000, seed=2)
    rows = hd.read_rows(replay(a, PARAMS, 0), a)
    m = hd.train(rows, hd.Pipeline(epochs=2)).to_bytes()
    reads = int(a.is_read.sum() + b.is_read.sum())
    c3 = route([a, b], "c3", PARAMS, 1)
    # Every replica tied: the ranking policy is C3; one inference per replica and read.
    tied = route([a, b], "model-rank", PARAMS, 1, models=[m, m], tie=1e6)
    assert tied["read_latency_ns"] == c3["read_latency_ns"]
    assert tied["inferences"] == 2 * reads
    cost = route([a, b], "model-cost", PARAMS, 1, models=[m, m], slow_factor=4.0)
    assert len(cost["read_latency_ns"]) == reads
    oracle = route([a, b], "oracle", PARAMS, 1)
    assert np.mean(oracle["read_latency_ns"]) <= np.mean(
        route([a, b], "baseline", PARAMS, 1)["read_latency_ns"]
    )
    # The probe records every replica at every decision and changes nothing.
    p = route([a, b], "c3", PARAMS, 1, probe_models=[m, m])
    assert p["read_latency_ns"] == c3["read_latency_ns"]
    cols = p["probe"]
    assert len(cols["margin"]) == 2 * reads and sum(cols["chosen"]) == reads
    chosen = np.asarray(cols["would_us"])[np.asarray(cols["chosen"], dtype=bool)]
    assert np.allclose(chosen, np.asarray(c3["read_latency_ns"]) / 1e3)
    with pytest.raises(attune.InvalidArgumentError, match="slow_factor"):
        route([a, b], "model-cost", PARAMS, 1, models=[m, m], slow_factor=0.5)
    with pytest.raises(attune.InvalidArgumentError, match="tie"):
        route([a, b], "model-rank", PARAMS, 1, models=[m, m], tie=-1.0)
    with pytest.raises(attune.InvalidArgumentError, match="models"):
        route([a, b], "model-rank", PARAMS, 1, models=[m])


def test_device_presets_and_busy_window_selection():
    from attune.io import DEVICE_PRESETS, device_params

    assert device_params("device-gc", {"channels": "4"}) == {
        "gc_chip_fraction": "1.0",
        "channels": "4",
    }
    assert set(DEVICE_PRESETS) >= {"default", "device-gc"}
    with pytest.raises(attune.InvalidArgumentError, match="unknown device preset"):
        device_params("floppy")
    a = synthetic_trace(3000, write_fraction=0.7, iops=40_000, seed=1)
    params = device_params("device-gc", PARAMS)
    groups = ev.random_windows([a], 2, 1200, 5, replicas=2, min_busy=0.02, params=params)
    for g in groups:
        for w, _ in g:
            assert ev.busy_share(w, params) >= 0.02
    with pytest.raises(attune.InvalidArgumentError, match="busy reads"):
        quiet = synthetic_trace(2000, write_fraction=0.1, iops=500, seed=3)
        ev.random_windows([quiet], 1, 1000, 1, min_busy=0.5, params=params)


def test_rule_search_and_device_model_use_training_rows_only():
    a = synthetic_trace(3000, write_fraction=0.7, iops=40_000, seed=1)
    params = {"gc_chip_fraction": "1.0", **PARAMS}
    groups = ev.random_windows([a], 2, 1200, 5, replicas=2)
    rows = ev.train_rows(groups[0], params, 0)
    rule, auc = hd.choose_rule(rows[0], hd.RULE_GRID[:3], epochs=2)
    assert rule in hd.RULE_GRID[:3] or rule == hd.LabelRule()
    assert np.isnan(auc) or 0.0 <= auc <= 1.0
    model = ev.device_model(rows, [rule, rule], hd.Pipeline(epochs=2))
    res = ev.evaluate_pair(
        groups[0],
        params=params,
        pipeline=hd.Pipeline(epochs=2),
        model=model,
        rules=[rule, rule],
        policies=("baseline", "heimdall", "heimdall-home"),
    )
    assert set(res.latency_us) == {"baseline", "heimdall", "heimdall-home"}


def test_drift_retrains_below_the_threshold():
    a = synthetic_trace(6000, write_fraction=0.7, iops=40_000, seed=4)
    params = {"gc_chip_fraction": "1.0", **PARAMS}
    p = hd.Pipeline(epochs=2)
    off = ev.drift_run(a, params=params, interval_s=0.02, threshold=0.01, pipeline=p)
    assert off.retrained_at == [] and len(off.auc_static) >= 2
    np.testing.assert_array_equal(off.auc_static, off.auc_retrain)
    on = ev.drift_run(a, params=params, interval_s=0.02, threshold=0.99, min_slow=1, pipeline=p)
    np.testing.assert_array_equal(on.auc_static, off.auc_static)
    scored = [x for x in on.auc_retrain[:-1] if not np.isnan(x)]
    assert len(on.retrained_at) >= 1 or not scored
    with pytest.raises(attune.InvalidArgumentError, match="interval"):
        ev.drift_run(a, params=params, interval_s=1e6)


def test_direct_replay_against_a_real_file(tmp_path, capsys):
    from attune import cli
    from attune.io import replay_direct

    t = synthetic_trace(200, write_fraction=0.3, iops=50_000, seed=2)
    r = replay_direct(t, str(tmp_path / "dev"), 2 << 20, direct=False)
    assert len(r["latency_ns"]) == 200 and all(b % 4096 == 0 for b in r["bytes"])
    assert (tmp_path / "dev").stat().st_size == 2 << 20
    with pytest.raises(attune.StorageIOError, match="no-such-dir"):
        replay_direct(t, str(tmp_path / "no-such-dir" / "dev"), 2 << 20, direct=False)
    with pytest.raises(attune.InvalidArgumentError, match="file_bytes"):
        replay_direct(t, str(tmp_path / "dev"), 1000, direct=False)
    trace = tmp_path / "t.trace"
    trace.write_text("".join(f"{i}.0 0 {i * 8192} 4096 {i % 2}\n" for i in range(50)))
    out = tmp_path / "lat.csv"
    rc = cli.main(
        [
            "io",
            "replay",
            str(trace),
            "--direct",
            str(tmp_path / "dev2"),
            "--file-mb",
            "2",
            "--buffered",
            "--out",
            str(out),
            "--json",
        ]
    )
    assert rc == 0
    assert len(out.read_text().splitlines()) == 51
    assert '"reads"' in capsys.readouterr().out


@pytest.mark.skipif(not SAMPLES.exists(), reason="real trace samples not present")
def test_real_samples_load():
    t = load_trace(SAMPLES / "msr-rw_20_80-105.trace")
    assert len(t) == 10_000 and int(t.is_read.sum()) == 2_020


def test_cli_simulate_train_and_eval(tmp_path, capsys):
    import json

    from attune.cli import main

    trace = tmp_path / "t.trace"
    t = synthetic_trace(3000, write_fraction=0.6, iops=30_000, seed=4)
    lines = [
        f"{ts / 1e6:.6f} 0 {o} {s} {1 if r else 0}"
        for ts, o, s, r in zip(t.timestamp_ns, t.offset, t.size, t.is_read)
    ]
    trace.write_text("\n".join(lines) + "\n")
    assert main(["io", "simulate", str(trace), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ios"] == 3000 and out["reads"]["count"] == int(t.is_read.sum())
    model = tmp_path / "m.heimdall"
    assert (
        main(
            ["io", "heimdall", "train", str(trace), "--out", str(model), "--epochs", "2", "--json"]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["dims"] == [11, 128, 16, 1]
    assert (
        main(
            [
                "io",
                "heimdall",
                "eval",
                str(trace),
                "--model",
                str(model),
                "--windows",
                "1",
                "--window-ios",
                "1500",
                "--json",
            ]
        )
        == 0
    )
    res = json.loads(capsys.readouterr().out)
    assert set(res["summary"]["policies"]) >= {"baseline", "heimdall", "c3", "hedging"}
    # Busy windows and a device model, as the benchmark's flags.
    assert (
        main(
            [
                "io",
                "heimdall",
                "eval",
                str(trace),
                "--device",
                "device-gc",
                "--min-busy",
                "0.01",
                "--device-model",
                "--epochs",
                "2",
                "--windows",
                "1",
                "--window-ios",
                "1500",
                "--json",
            ]
        )
        == 0
    )
    res = json.loads(capsys.readouterr().out)
    assert "heimdall-rank" in res["summary"]["policies"]
    csv = tmp_path / "out.csv"
    assert main(["io", "replay", str(trace), "--out", str(csv)]) == 0
    assert len(csv.read_text().splitlines()) == 3001


def test_cli_errors_name_the_problem(tmp_path, capsys):
    from attune.cli import main

    assert main(["io", "simulate", "--set", "channels=0"]) != 0
    assert "`channels`" in capsys.readouterr().err
    bad = tmp_path / "bad.trace"
    bad.write_text("0 0 0 4096 1\n1 0 0 4096 9\n")
    assert main(["io", "simulate", str(bad)]) != 0
    assert "line 2" in capsys.readouterr().err
    assert main(["io", "heimdall", "eval", str(bad), "--min-busy", "1.5"]) != 0
    assert "--min-busy" in capsys.readouterr().err


def test_bench_plots_from_rows(tmp_path, capsys):
    import json

    from attune.bench import heimdall as bh
    from attune.cli import main

    rows = []
    for w in range(3):
        for i, pol in enumerate(("c3", "heimdall", "heimdall-cost", "oracle")):
            q = [100.0 * (1 + i) * (1 + p / 10) for p in ev.CDF_PERCENTILES]
            rows.append(
                {
                    "bench": "heimdall",
                    "kind": "policy",
                    "window": w,
                    "policy": pol,
                    "replicas": 2,
                    "device": "device-gc",
                    "traces": ["a", "b"],
                    "mean_over_best_baseline": 1.0 + i / 10,
                    "quantiles_us": q,
                }
            )
        rows.append({"bench": "heimdall", "kind": "ladder", "window": w, "stage": "s", "auc": 0.8})
    made = bh.plot(rows, tmp_path / "plots", "x")
    assert [p.name for p in made] == ["x-cdf.png", "x-vs-best.png", "x-ladder.png"]
    assert all(p.stat().st_size > 1000 for p in made)
    src = tmp_path / "r.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "again"
    assert main(["bench", "heimdall", "--plot-from", str(src), "--plots", str(out)]) == 0
    assert (out / "heimdall-2r-device-gc-cdf.png").exists()
    src.write_text("not json\n")
    assert main(["bench", "heimdall", "--plot-from", str(src), "--plots", str(out)]) != 0
    assert "line 1" in capsys.readouterr().err


def test_concatenated_traces_change_regime():
    from attune.io.trace import concat_traces

    a = synthetic_trace(100, iops=1000, seed=1)
    b = synthetic_trace(50, iops=10, seed=2)
    c = concat_traces([a, b], gap_ns=5)
    assert len(c) == 150 and np.all(np.diff(c.timestamp_ns.astype(np.int64)) >= 0)
    assert int(c.timestamp_ns[100]) == int(a.timestamp_ns[-1] - a.timestamp_ns[0]) + 5
    with pytest.raises(attune.InvalidArgumentError):
        concat_traces([])


def test_the_write_clock_is_fitted_from_host_data_and_routes_around_predicted_gc():
    from attune.io import write_clock_flags

    # Two halves served alone by a device-wide-GC device with the default buffer (flushes of
    # 4 MiB) and GC every 16 MiB flushed: the grid search finds both from writes and labels.
    params = {"gc_chip_fraction": "1.0"}
    halves = [synthetic_trace(3000, write_fraction=0.2, iops=5_000, seed=s) for s in (1, 2)]
    labels = []
    for h in halves:
        rows = hd.read_rows(replay(h, params, 0), h)
        labels.append(hd.label_periods(rows["size"], rows["latency_ns"], hd.LabelRule()))
    clock, f1 = hd.fit_write_clock(halves, labels)
    assert clock is not None and clock[:2] == (4 << 20, 16 << 20) and clock[3] == 100_000.0
    assert 0.5 < f1 <= 1.0
    flags = write_clock_flags(halves[0], clock)
    assert flags.shape == (len(halves[0]),) and flags.any() and not flags.all()
    # Nothing to fit: no slow reads.
    assert hd.fit_write_clock(halves[:1], [np.zeros_like(labels[0])]) == (None, 0.0)
    with pytest.raises(attune.InvalidArgumentError, match="label arrays"):
        hd.fit_write_clock(halves, labels[:1])
    # Routing with the clock: C3 moves reads away from the replica it predicts busy.
    a, b = halves
    c3 = route([a, b], "c3", params, 1)
    clocked = route([a, b], "c3", params, 1, write_clock=clock)
    assert len(clocked["read_latency_ns"]) == len(c3["read_latency_ns"])
    assert clocked["read_latency_ns"] != c3["read_latency_ns"]
    for bad, name in (
        ((0, 1 << 20, 0.0, 1000.0), "flush_bytes"),
        ((1 << 20, 0, 0.0, 1000.0), "gc_every_bytes"),
        ((1 << 20, 1 << 20, float("nan"), 1000.0), "delay_us"),
        ((1 << 20, 1 << 20, 0.0, 0.0), "busy_us"),
    ):
        with pytest.raises(attune.InvalidArgumentError, match=name):
            route([a, b], "c3", params, 1, write_clock=bad)
    m = hd.train(hd.read_rows(replay(a, params, 0), a), hd.Pipeline(epochs=2)).to_bytes()
    with pytest.raises(attune.InvalidArgumentError, match="write_clock"):
        route([a, b], "c3", params, 1, probe_models=[m, m], write_clock=clock)
    # Expected-latency routing: with no penalty for a slow prediction it is C3; a factor below
    # 1 is refused by name.
    flat = route([a, b], "model-expect", params, 1, models=[m, m], slow_factor=1.0)
    assert flat["read_latency_ns"] == c3["read_latency_ns"] and flat["inferences"] > 0
    with pytest.raises(attune.InvalidArgumentError, match="slow_factor"):
        route([a, b], "model-expect", params, 1, models=[m, m], slow_factor=0.5)
    # The anchored clock's refinements: each run is deterministic; without a clock the anchor's
    # refinements change nothing, and a vote, which needs one, is refused.
    aged = {"aged_bytes": [3 << 20, 11 << 20], "clock_anchor_us": 1000.0}
    for refine in (
        {},
        {"clock_anchor_writes": True},
        {"clock_anchor_gate": True},
        {"clock_vote": True},
    ):
        one = route([a, b], "c3", params, 1, write_clock=clock, **aged, **refine)
        assert one == route([a, b], "c3", params, 1, write_clock=clock, **aged, **refine)
        if "clock_vote" in refine:
            with pytest.raises(attune.InvalidArgumentError, match="clock_vote=True needs"):
                route([a, b], "c3", params, 1, **aged, **refine)
            continue
        plain = route([a, b], "c3", params, 1, **aged, **refine)
        assert plain["read_latency_ns"] == route([a, b], "c3", params, 1, **aged)["read_latency_ns"]
    # Backup reads for risky reads: counted, deterministic, never slower than without a backup
    # for the reads answered before the first backup; bad settings are refused by name.
    voted = {**aged, "clock_vote": True, "write_clock": clock}
    base = route([a, b], "c3", params, 1, **voted, hedge_delay_us=0)
    every = {"hedge_delay_us": 500.0, "hedge_every_read": True}
    h = route([a, b], "c3", params, 1, **voted, **every)
    assert h == route([a, b], "c3", params, 1, **voted, **every)
    assert base["hedged"] == 0 and h["hedged"] > 0
    first = next(i for i, v in enumerate(base["read_latency_ns"]) if v > 500_000)
    assert h["read_latency_ns"][:first] == base["read_latency_ns"][:first]
    assert h["read_latency_ns"][first] <= base["read_latency_ns"][first]
    for bad, name in (
        ({"hedge_delay_us": -1.0}, "hedge_delay_us"),
        ({"hedge_delay_us": float("nan")}, "hedge_delay_us"),
        ({"hedge_delay_us": 10.0, "hedge_margin": float("inf")}, "hedge_margin"),
        ({"hedge_delay_us": 10.0, "hedge_margin": -1.0}, "hedge_margin"),
    ):
        with pytest.raises(attune.InvalidArgumentError, match=name):
            route([a, b], "c3", params, 1, **bad)
    with pytest.raises(attune.InvalidArgumentError, match="hedge_delay"):
        route([a, b], "oracle", params, 1, hedge_delay_us=10.0)
    # An unknown phase by default: the voted clock, every read hedged after twice the anchor
    # latency; the anchored clock without backups stays selectable.
    from attune.io import HEDGE_DELAY_FACTOR

    unknown = {**aged, "write_clock": clock}
    default = route([a, b], "c3", params, 1, **unknown)
    chosen = {
        "clock_vote": True,
        "hedge_delay_us": HEDGE_DELAY_FACTOR * aged["clock_anchor_us"],
        "hedge_every_read": True,
    }
    assert default == route([a, b], "c3", params, 1, **unknown, **chosen)
    old = route([a, b], "c3", params, 1, **unknown, clock_vote=False, hedge_delay_us=0)
    assert old["hedged"] == 0 and old != default
    # A half-life on the vote is deterministic, and refused where there is no clock to vote.
    decayed = route([a, b], "c3", params, 1, **unknown, clock_vote_half_life=8)
    assert decayed == route([a, b], "c3", params, 1, **unknown, clock_vote_half_life=8)
    with pytest.raises(attune.InvalidArgumentError, match="clock_vote_half_life needs"):
        route([a, b], "c3", params, 1, clock_vote_half_life=8)
    # A known phase, hedging and the oracle get no backups by default.
    assert route([a, b], "c3", params, 1, write_clock=clock)["hedged"] == 0
    assert route([a, b], "oracle", params, 1, **unknown)["hedged"] == 0


def test_write_load_estimates_the_collecting_chips():
    from attune.io import write_load

    # Two 64 KiB writes and one 4 KiB read within 1 ms.
    t = parse_trace(b"0 0 0 65536 0\n1 0 65536 65536 0\n1 0 0 4096 1\n", "msr")
    ld = write_load(t)
    assert ld["write_bytes_per_s"] == pytest.approx(131_072 / 1e-3)
    duty = min(1.0, 131_072e3 * 0.1 / (16 << 20))
    prog = 131_072e3 / 16384 / 32 * 600e-6
    reads = 1e3 / 32 * 60e-6 * (1 + duty * 34)
    assert ld["gc_duty"] == pytest.approx(duty) and ld["chip_load"] == pytest.approx(prog + reads)
    assert write_load(parse_trace(b"0 0 0 4096 0\n", "msr"))["chip_load"] == 0.0
    # The suggested rerate brings the load to half the limit, whether the rerated GC duty is
    # saturated (default device) or not (shorter busy periods).
    from attune.io import LOAD_LIMIT, synthetic_trace

    heavy = synthetic_trace(3000, iops=20000)
    for params in (None, {"gc_duration_us": 50000}):
        f = write_load(heavy, params)["rerate"]
        assert 0 < f < 1
        rerated = write_load(heavy.rerate(f), params)
        assert rerated["chip_load"] == pytest.approx(LOAD_LIMIT / 2, rel=1e-3)


def test_cli_simulate_warns_when_the_trace_overloads_the_device(capsys):
    import json

    from attune.cli import main

    # The library's synthetic trace (20,000 I/Os/s, 70 % writes of 16-128 KiB) offers about
    # 1 GB/s of writes, which keeps garbage collection running on the default device.
    assert main(["io", "simulate", "--synthetic", "3000", "--iops", "20000", "--json"]) == 0
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    assert "overloads the simulated device" in out["warning"] and "--rerate" in out["warning"]
    assert "warning:" in cap.err and "--set program_page_us" in cap.err
    loaded = out["writes"]["p99_us"]
    rerate = out["warning"].split("--rerate ")[1].split(")")[0]
    assert (
        main(
            [
                "io",
                "simulate",
                "--synthetic",
                "3000",
                "--iops",
                "20000",
                "--rerate",
                rerate,
                "--json",
            ]
        )
        == 0
    )
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    assert out["warning"] is None and cap.err == ""
    assert out["writes"]["p99_us"] < loaded / 10


def test_cli_replay_warns_when_the_simulated_device_is_overloaded(tmp_path, capsys):
    import json

    from attune.cli import main

    out = tmp_path / "lat.csv"
    argv = ["io", "replay", "--synthetic", "2000", "--out", str(out), "--json"]
    assert main([*argv, "--iops", "20000"]) == 0
    cap = capsys.readouterr()
    assert "overloads the simulated device" in json.loads(cap.out)["warning"]
    assert "warning:" in cap.err
    assert main(argv) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["warning"] is None and cap.err == ""
