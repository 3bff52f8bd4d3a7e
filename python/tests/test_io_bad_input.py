"""attune.io with bad input: every case is a catchable attune.Error naming what was wrong, from
the Python API and from the CLI (exit code 1, one line on stderr, no traceback)."""

from __future__ import annotations

import itertools
import math
import os
from pathlib import Path

import numpy as np
import pytest

import attune
from attune import cli
from attune.io import evaluate as ev
from attune.io import heimdall as hd
from attune.io import load_trace, replay, replay_direct, route, ssd_params, synthetic_trace


def _mlp(dims: list[int], kind: int, joint: int = 1) -> hd.Mlp:
    rng = np.random.default_rng(0)
    ws = [rng.normal(0, 0.3, (o, i)).astype(np.float32) for i, o in itertools.pairwise(dims)]
    bs = [np.zeros(o, dtype=np.float32) for o in dims[1:]]
    lo = np.zeros(dims[0], dtype=np.float32)
    hi = np.full(dims[0], 100.0, dtype=np.float32)
    return hd.Mlp(ws, bs, lo, hi, kind, joint, 0.5)


@pytest.fixture
def files(tmp_path):
    """A TinFetch model, a Heimdall model, one of joint size 3, and a small MSR trace."""
    tin = tmp_path / "tin.model"
    tin.write_bytes(_mlp([10, 8, 1], hd.KIND_TINFETCH).to_bytes())
    heim = tmp_path / "heim.model"
    heim.write_bytes(_mlp([11, 8, 1], hd.KIND_HEIMDALL).to_bytes())
    joint3 = tmp_path / "joint3.model"
    joint3.write_bytes(_mlp([13, 8, 1], hd.KIND_HEIMDALL, joint=3).to_bytes())
    t = synthetic_trace(3000, write_fraction=0.6, iops=30_000, seed=4)
    trace = tmp_path / "t.trace"
    trace.write_text(
        "".join(
            f"{ts / 1e6:.6f} 0 {off} {size} {1 if r else 0}\n"
            for ts, off, size, r in zip(t.timestamp_ns, t.offset, t.size, t.is_read)
        )
    )
    # Reads only, far apart: the device never collects garbage, no read is ever slow.
    quiet = tmp_path / "quiet.trace"
    quiet.write_text("".join(f"{i * 10.0:.1f} 0 {i * 4096} 4096 1\n" for i in range(400)))
    return {"tin": tin, "heim": heim, "joint3": joint3, "trace": trace, "quiet": quiet}


# ---------------------------------------------------------------- model files
def test_load_model_refuses_a_tinfetch_model(files):
    with pytest.raises(attune.InvalidArgumentError) as e:
        hd.load_model(files["tin"])
    assert f"{files['tin']} is a TinFetch model (kind 3), not an admission model" in str(e.value)
    assert "Heimdall kind 1 or 4, LinnOS kind 2" in str(e.value)
    # The bytes still decode as what they are (the prefetcher's reader uses them).
    assert hd.model_from_bytes(files["tin"].read_bytes()).kind == hd.KIND_TINFETCH
    assert hd.load_model(files["heim"]).kind == hd.KIND_HEIMDALL


def test_a_truncated_model_says_truncated_with_both_lengths(files, tmp_path):
    data = files["heim"].read_bytes()
    cut = tmp_path / "cut.model"
    cut.write_bytes(data[:-100])
    with pytest.raises(attune.CorruptionError) as e:
        hd.load_model(cut)
    msg = str(e.value)
    assert f"truncated ({len(data) - 100} of {len(data)} bytes)" in msg
    assert str(cut) in msg and "checksum" not in msg


def test_mlp_repr_is_one_line(files):
    m = hd.load_model(files["heim"])
    assert repr(m) == "Mlp(11x8x1, kind=1, threshold=0.500)"
    assert "joint=3" in repr(hd.load_model(files["joint3"]))


# ---------------------------------------------------------------- range checks (Python)
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n": 0}, "n must be in 1.."),
        ({"n": -1}, "n must be in 1.."),
        ({"n": 2.5}, "n must be an integer"),
        ({"iops": 0}, "iops"),
        ({"iops": math.nan}, "iops"),
        ({"iops": math.inf}, "iops"),
        ({"write_fraction": 2.0}, "write_fraction"),
        ({"write_fraction": -0.1}, "write_fraction"),
        ({"seed": -1}, "seed"),
    ],
)
def test_synthetic_trace_checks_its_arguments(kwargs, match):
    with pytest.raises(attune.InvalidArgumentError, match=match):
        synthetic_trace(**kwargs)


def test_resize_and_rerate_need_finite_bounded_factors():
    t = synthetic_trace(50)
    for bad in (math.inf, 1e30, math.nan, 0.0, -1.0):
        with pytest.raises(attune.InvalidArgumentError, match="factor must be a finite"):
            t.resize(bad)
        with pytest.raises(attune.InvalidArgumentError, match="rate must be a finite"):
            t.rerate(bad)
    assert len(t.resize(1024.0)) == 50 and len(t.rerate(1e3)) == 50


def test_seeds_out_of_range_are_invalid_arguments():
    t = synthetic_trace(50)
    with pytest.raises(attune.InvalidArgumentError, match="seed"):
        replay(t, seed=-1)
    with pytest.raises(attune.InvalidArgumentError, match="seed"):
        replay(t, seed=2**64)
    with pytest.raises(attune.InvalidArgumentError, match="seed"):
        route([t, t], "c3", seed=-1)


def test_pipeline_checks_its_fields():
    for bad in ({"epochs": 0}, {"epochs": -1}, {"joint": 10}, {"seed": -1}, {"features": "x"}):
        with pytest.raises(attune.InvalidArgumentError):
            hd.Pipeline(**bad)
    with pytest.raises(attune.InvalidArgumentError, match="epochs must be an integer in 1.."):
        hd.Pipeline(epochs=0)


def test_training_on_one_class_is_refused_with_advice():
    t = synthetic_trace(600, write_fraction=0.0, iops=100, seed=1)
    rows = hd.read_rows(replay(t), t)
    with pytest.raises(attune.InvalidArgumentError, match="one class") as e:
        hd.train(rows, hd.Pipeline(epochs=1))
    assert "device-gc" in str(e.value) and "--min-busy" in str(e.value)
    # The evaluation's per-window models may be one class: they admit every read.
    m = hd.train(rows, hd.Pipeline(epochs=1), allow_one_class=True)
    assert m.dims == [11, 128, 16, 1]


def test_roc_auc_checks_lengths_and_documents_one_class():
    with pytest.raises(attune.InvalidArgumentError, match="same length"):
        hd.roc_auc([0, 1, 1], [0.1, 0.2])
    assert math.isnan(hd.roc_auc([1, 1], [0.1, 0.2]))
    assert hd.roc_auc([0, 1], [0.1, 0.2]) == 1.0


def test_load_trace_takes_str_bytes_and_pathlike(files):
    p = files["trace"]
    n = len(load_trace(str(p)))
    assert len(load_trace(os.fsencode(p))) == n
    assert len(load_trace(Path(p))) == n
    with pytest.raises(attune.InvalidArgumentError, match="str, bytes or os.PathLike"):
        load_trace(42)


def test_ssd_params_are_numbers_and_round_trip():
    p = ssd_params()
    assert isinstance(p["channels"], int) and p["channels"] > 0
    assert all(isinstance(v, (int, float)) for v in p.values()), p
    assert ssd_params(p) == p
    t = synthetic_trace(50)
    assert replay(t, p)["latency_ns"] == replay(t)["latency_ns"]


# ---------------------------------------------------------------- memory-backed files
def _fs_type(path: Path) -> str:
    """The file system type of ``path``, from the mount table (the longest mount point)."""
    best, kind = "", ""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        f = line.split(" ")
        mnt = f[1]
        if (str(path) + "/").startswith(mnt.rstrip("/") + "/") and len(mnt) >= len(best):
            best, kind = mnt, f[2]
    return kind


def test_direct_replay_reports_a_memory_backed_file(tmp_path):
    t = synthetic_trace(50, write_fraction=0.3, seed=2)
    r = replay_direct(t, str(tmp_path / "dev"), 1 << 20, direct=False)
    assert r["memory_backed"] == (_fs_type(tmp_path) in ("tmpfs", "ramfs"))
    shm = Path("/dev/shm")
    if not shm.is_dir() or _fs_type(shm) != "tmpfs" or not os.access(shm, os.W_OK):
        pytest.skip("no writable tmpfs at /dev/shm")
    f = shm / f"attune-test-{os.getpid()}.img"
    try:
        r = replay_direct(t, str(f), 1 << 20, direct=False)
        assert r["memory_backed"] is True
    finally:
        f.unlink(missing_ok=True)


# ---------------------------------------------------------------- the CLI
def _fails(capsys, argv: list[str], match: str) -> str:
    rc = cli.main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == 1, (argv, rc, err)
    assert len(lines) == 1 and lines[0].startswith("attune: error: "), err
    assert "Traceback" not in err
    assert match in lines[0], (match, lines[0])
    return lines[0]


def test_cli_bad_inputs_are_one_line_errors(files, tmp_path, capsys):
    trace, out = str(files["trace"]), str(tmp_path / "m.model")
    cases = [
        (["io", "simulate", "--resize", "inf"], "--resize must be a finite factor in"),
        (["io", "simulate", "--resize", "1e30"], "[0.001, 1024]"),
        (["io", "simulate", "--rerate", "0"], "--rerate must be a finite factor"),
        (
            ["io", "heimdall", "eval", trace, "--window-ios", "5000"],
            "--window-ios must be in 100..3000",
        ),
        (["io", "heimdall", "train", trace, "--epochs", "0", "--out", out], "--epochs"),
        (["io", "heimdall", "train", trace, "--epochs", "-1", "--out", out], "1..10000"),
        (["io", "heimdall", "eval", trace, "--epochs", "0"], "--epochs must be in 1..10000"),
        (
            ["io", "heimdall", "train", str(files["quiet"]), "--epochs", "1", "--out", out],
            "one class",
        ),
        (
            ["io", "heimdall", "eval", trace, "--model", str(files["tin"])],
            "is a TinFetch model (kind 3), not an admission model (Heimdall kind 1 or 4",
        ),
        (
            ["io", "heimdall", "eval", trace, "--model", str(files["joint3"])],
            "joint size 3; eval's --model takes joint size 1",
        ),
        (["io", "heimdall", "eval", trace, "--policies", "psychic"], "--policies: unknown"),
        (
            ["io", "heimdall", "eval", trace, "--rule-search", "--model", str(files["heim"])],
            "--rule-search",
        ),
    ]
    for argv, match in cases:
        _fails(capsys, argv, match)
    cut = tmp_path / "cut.model"
    cut.write_bytes(files["heim"].read_bytes()[:-10])
    _fails(capsys, ["io", "heimdall", "eval", trace, "--model", str(cut)], "truncated (")
    assert not Path(out).exists()


def test_cli_eval_takes_the_bench_options(files, capsys):
    import json

    rc = cli.main(
        [
            "io",
            "heimdall",
            "eval",
            str(files["trace"]),
            "--model",
            str(files["heim"]),
            "--windows",
            "1",
            "--window-ios",
            "1200",
            "--policies",
            "baseline,c3",
            "--live-rank-tie",
            "2",
            "--probe-reads-us",
            "1000",
            "--no-augment",
            "--no-progress",
            "--json",
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["summary"]["policies"]) == {"baseline", "c3", "heimdall"}


def test_cli_help_documents_eval_options(capsys):
    with pytest.raises(SystemExit):
        cli.main(["io", "heimdall", "eval", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for opt in ("--policies", "--live-rank-tie", "--probe-reads-us", "--rule-search"):
        assert opt in text
    assert "joint size 1" in text and "ignore it" in text


def test_direct_replay_refuses_an_existing_file_unless_told(tmp_path, capsys):
    t = synthetic_trace(50, write_fraction=0.3, seed=2)
    precious = tmp_path / "precious.dat"
    precious.write_bytes(b"someone's data" * 1000)
    before = precious.read_bytes()
    with pytest.raises(attune.InvalidArgumentError, match="overwrite"):
        replay_direct(t, str(precious), 1 << 20, direct=False)
    assert precious.read_bytes() == before
    rc = cli.main(
        [
            "io",
            "replay",
            "--synthetic",
            "50",
            "--direct",
            str(precious),
            "--file-mb",
            "1",
            "--buffered",
            "--out",
            str(tmp_path / "lat.csv"),
        ]
    )
    assert rc == 1 and "--overwrite" in capsys.readouterr().err
    assert precious.read_bytes() == before
    r = replay_direct(t, str(precious), 1 << 20, direct=False, overwrite=True)
    assert len(r["latency_ns"]) == 50


def test_an_output_that_names_the_input_is_refused(tmp_path, capsys):
    trace = tmp_path / "x.trace"
    trace.write_text("".join(f"{i} 0 {i * 4096} 4096 {i % 2}\n" for i in range(200)))
    before = trace.read_bytes()
    for argv in (
        ["io", "replay", str(trace), "--out", str(trace)],
        ["io", "heimdall", "train", str(trace), "--out", str(trace)],
    ):
        assert cli.main(argv) == 1
        assert "would destroy the input" in capsys.readouterr().err
        assert trace.read_bytes() == before


# ---------------------------------------------------------------- trace order and overflow
def test_out_of_order_timestamps_are_sorted_stably_and_counted(tmp_path, capsys):
    import json
    import warnings

    p = tmp_path / "late.trace"
    p.write_text("5 0 4096 4096 1\n3 0 8192 4096 1\n4 0 0 4096 0\n3 0 12288 4096 0\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = load_trace(p)
        assert t.duration_ns == 2_000_000
    assert t.timestamp_ns.tolist() == [0, 0, 1_000_000, 2_000_000]
    assert t.offset.tolist() == [8192, 12288, 0, 4096]  # equal times keep their file order
    assert t.reordered == 3
    assert load_trace(files_in_order(tmp_path)).reordered == 0
    assert cli.main(["io", "simulate", str(p), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["reordered_ios"] == 3 and out["duration_s"] == 0.002
    assert cli.main(["io", "simulate", str(p)]) == 0
    assert "3 I/Os moved into time order" in capsys.readouterr().out


def files_in_order(tmp_path: Path) -> Path:
    p = tmp_path / "ordered.trace"
    p.write_text("1 0 0 4096 1\n1 0 4096 4096 1\n2 0 0 4096 0\n")
    return p


def test_a_trace_built_out_of_order_has_no_wrapped_duration():
    t = synthetic_trace(10)
    rev = attune.io.Trace(t.timestamp_ns[::-1].copy(), t.offset, t.size, t.is_read)
    assert rev.duration_ns == t.duration_ns


def test_resize_refuses_sizes_beyond_32_bits_instead_of_wrapping(tmp_path, capsys):
    p = tmp_path / "big.trace"
    p.write_text("0 0 0 16777216 1\n1 0 0 4294967295 0\n2 0 0 4096 1\n")
    t = load_trace(p)
    with pytest.raises(attune.InvalidArgumentError) as e:
        t.resize(1024)
    assert "factor 1024" in str(e.value) and "I/O 0 of 16777216 bytes" in str(e.value)
    assert t.resize(1.0).size.tolist() == t.size.tolist()
    assert t.resize(0.001).size.tolist() == [16777, 4294967, 4]
    _fails(capsys, ["io", "simulate", str(p), "--resize", "2"], "--resize 2: I/O 1 of 4294967295")


def test_rerate_refuses_a_timestamp_overflow_instead_of_collapsing(tmp_path, capsys):
    p = tmp_path / "long.trace"
    p.write_text("0 0 0 4096 1\n50000000000 0 4096 4096 1\n")
    t = load_trace(p)
    with pytest.raises(attune.InvalidArgumentError, match="2\\*\\*64-1 ns"):
        t.rerate(0.001)
    assert t.rerate(0.01).timestamp_ns[-1] == 5 * 10**18
    _fails(capsys, ["io", "simulate", str(p), "--rerate", "0.001"], "--rerate 0.001: timestamp")


# ---------------------------------------------------------------- CLI options, before any work
def test_cli_options_are_range_checked_with_their_names(files, tmp_path, capsys):
    trace = str(files["trace"])
    small = ["--windows", "1", "--window-ios", "1000", "--no-progress", trace]
    cases = [
        (["bench", "heimdall", "--joints", "1,abc", *small], "--joints must be comma-separated"),
        (["bench", "heimdall", "--joints", "0", *small], "integers in 1..9, got '0'"),
        (["bench", "heimdall", "--drift", "--drift-interval", "0", trace], "--drift-interval"),
        (["bench", "heimdall", "--drift", "--drift-threshold", "2", trace], "--drift-threshold"),
        (["bench", "heimdall", "--drift", "--drift-rerate", "0", trace], "--drift-rerate must"),
        (["bench", "heimdall", "--min-busy", "nan", *small], "--min-busy must be >= 0"),
        (
            ["bench", "heimdall", "--rank-tie", "nan", *small],
            "--rank-tie must be a finite number >= 0, got nan",
        ),
        (["bench", "heimdall", "--live-rank-tie", "nan", *small], "--live-rank-tie"),
        (["bench", "heimdall", "--epochs", "0", *small], "--epochs must be in 1..10000"),
        (["bench", "heimdall", "--windows", "0", trace], "--windows must be at least 1"),
        (["bench", "heimdall", "--window-ios", "99", trace], "--window-ios must be at least 100"),
        (
            ["bench", "heimdall", *small, "--out", str(tmp_path / "no" / "x.jsonl")],
            "does not exist",
        ),
        (["io", "heimdall", "eval", trace, "--min-busy", "nan"], "--min-busy must be >= 0"),
        (
            ["io", "heimdall", "eval", trace, "--rank-tie", "nan"],
            "--rank-tie must be a finite number >= 0, got nan",
        ),
        (["io", "heimdall", "eval", trace, "--joint", "3"], "--joint 3: eval routes one read"),
    ]
    for argv, match in cases:
        _fails(capsys, argv, match)
    assert not (tmp_path / "no").exists()


def test_a_window_as_long_as_the_trace_is_refused_for_several_windows(files, capsys):
    trace = str(files["trace"])  # 3000 I/Os
    for verb in (["io", "heimdall", "eval"], ["bench", "heimdall"]):
        _fails(
            capsys,
            [*verb, trace, "--windows", "3", "--window-ios", "3000", "--no-progress"],
            "--window-ios 3000 is the whole of trace t.trace",
        )
    t = load_trace(files["trace"])
    with pytest.raises(attune.InvalidArgumentError, match="would be the same"):
        ev.random_windows([t], 2, 3000, 0)
    assert len(ev.random_windows([t], 1, 3000, 0, augmentations=False)) == 1


def test_plots_and_json_of_a_non_utf8_trace_name(files, tmp_path, capsys):
    import json

    name = os.fsdecode(b"\xff.trace")
    p = tmp_path / name
    p.write_bytes(files["trace"].read_bytes())
    t = load_trace(p)
    assert t.name == "\ufffd.trace"
    assert cli.main(["io", "simulate", str(p), "--json"]) == 0
    out = capsys.readouterr().out
    out.encode("utf-8")  # strict UTF-8: no lone surrogate
    assert json.loads(out)["trace"] == "\ufffd.trace"
    rows = [
        {
            "kind": "policy",
            "window": 0,
            "policy": pol,
            "quantiles_us": [float(i + 1) for i in range(len(ev.CDF_PERCENTILES))],
            "mean_over_best_baseline": 1.0,
            "traces": [name, name],  # as an older results file may hold it
        }
        for pol in ("baseline", "heimdall")
    ]
    from attune.bench import heimdall as bh

    made = bh.plot(rows, tmp_path / "plots", "x")
    assert made and all(m.exists() for m in made)


def test_a_bench_drift_run_where_every_trace_is_skipped_fails(files, capsys):
    _fails(
        capsys,
        [
            "bench",
            "heimdall",
            "--drift",
            "--drift-interval",
            "1e6",
            "--no-progress",
            str(files["trace"]),
        ],
        "every trace was skipped: t.trace: trace 't.trace' has 1 interval(s)",
    )


# ---------------------------------------------------------------- training that learns nothing
def test_train_warns_when_the_model_declines_no_training_read(files, tmp_path, capsys, monkeypatch):
    import json

    real_train = hd.train

    def admit_all(rows, p=hd.DEFAULT_PIPELINE, labels=None, **kw):
        m = real_train(rows, p, labels, **kw)
        m.biases[-1] = m.biases[-1] - 1000.0  # every probability ~0: declines nothing
        return m

    monkeypatch.setattr(hd, "train", admit_all)
    out = str(tmp_path / "m.model")
    argv = ["io", "heimdall", "train", str(files["trace"]), "--epochs", "1", "--out", out]
    assert cli.main([*argv, "--json"]) == 0
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    assert doc["declined_train_reads"] == 0 and "declines none" in doc["warning"]
    assert "attune: warning: the model declines none" in cap.err and "device-gc" in cap.err
    monkeypatch.setattr(hd, "train", real_train)
    assert cli.main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["warning"] is None and doc["declined_train_reads"] > 0


# ---------------------------------------------------------------- API arguments
def test_roc_auc_refuses_nan_scores_and_non_binary_labels():
    with pytest.raises(attune.InvalidArgumentError, match="NaN \\(index 1\\)"):
        hd.roc_auc([0, 1, 0, 1], [0.1, float("nan"), 0.3, 0.2])
    with pytest.raises(attune.InvalidArgumentError, match="0 or 1, got 2 at index 1"):
        hd.roc_auc([0, 2, 0, 1], [0.1, 0.5, 0.3, 0.2])
    assert hd.roc_auc(np.array([False, True]), [0.1, 0.2]) == 1.0


def test_quantised_scores_checks_its_inputs(files):
    model = files["heim"].read_bytes()
    with pytest.raises(attune.InvalidArgumentError, match="not finite \\(row 0\\)"):
        hd.quantised_scores(model, np.full((2, 11), np.nan, np.float32))
    with pytest.raises(attune.InvalidArgumentError, match="not bytes"):
        hd.quantised_scores(model, b"\0" * 44)
    with pytest.raises(attune.InvalidArgumentError, match="shape \\(rows, 11\\)"):
        hd.quantised_scores(model, np.zeros((3, 5)))
    with pytest.raises(attune.InvalidArgumentError, match="TinFetch"):
        hd.quantised_scores(files["tin"].read_bytes(), np.zeros((1, 10)))
    assert len(hd.quantised_scores(model, np.zeros((2, 11)))) == 2


def test_api_misuse_raises_attune_errors_naming_the_argument(files, tmp_path):
    t = load_trace(files["trace"])
    other = synthetic_trace(100)
    cases = [
        (lambda: hd.read_rows(replay(t), other), "pass the trace that was replayed"),
        (lambda: hd.read_rows({}, t), "missing features"),
        (lambda: hd.label_periods(t.size[:10], np.ones(len(t))), "1-D of one length"),
        (lambda: hd.train({}, hd.Pipeline(epochs=1)), "rows lack features"),
        (lambda: replay([1, 2, 3]), "trace must be an attune.io.Trace"),
        (lambda: ssd_params("device-gc"), "params must be a dict"),
        (lambda: replay_direct(t, str(tmp_path / "x.img"), -1), "file_bytes must be at least"),
        (lambda: replay_direct(t, str(tmp_path / "x.img"), 1 << 20, speed=1e-9), "speed must"),
        (lambda: replay_direct(t, 42, 1 << 20), "path must be str, bytes or os.PathLike"),
        (lambda: route([t, [1]], "c3"), "every trace must be an attune.io.Trace"),
    ]
    for call, match in cases:
        with pytest.raises(attune.Error, match=match):
            call()
    assert not (tmp_path / "x.img").exists()


def test_bytes_and_pathlike_paths_are_accepted(files, tmp_path):
    m = hd.load_model(files["heim"])
    target = tmp_path / "b.model"
    m.save(os.fsencode(target))
    assert hd.load_model(os.fsencode(target)).to_bytes() == m.to_bytes()
    t = synthetic_trace(20, write_fraction=0.5, seed=3)
    r = replay_direct(t, os.fsencode(tmp_path / "b.img"), 1 << 20, direct=False)
    assert len(r["latency_ns"]) == 20


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"aged_bytes": [-1, 5]}, "aged_bytes"),
        ({"aged_bytes": [2**70, 1]}, "aged_bytes"),
        ({"aged_bytes": [1.5, 2]}, "aged_bytes"),
        ({"clock_vote_half_life": -1}, "clock_vote_half_life"),
        ({"write_clock": (1, 2)}, "write_clock"),
    ],
)
def test_route_integer_arguments_are_invalid_argument_errors_naming_them(kwargs, name):
    t = synthetic_trace(200, seed=1)
    with pytest.raises(attune.InvalidArgumentError, match=name):
        route([t, t], "c3", **kwargs)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"clock_vote": True}, "clock_vote=True needs a write_clock"),
        ({"clock_vote_half_life": 8}, "clock_vote_half_life needs"),
        ({"hedge_every_read": True}, "hedge_every_read=True needs hedge_delay_us"),
        ({"hedge_delay_us": 100.0}, "would hedge no read"),
    ],
)
def test_route_settings_that_cannot_take_effect_are_refused(kwargs, name):
    t = synthetic_trace(200, seed=1)
    with pytest.raises(attune.InvalidArgumentError, match=name):
        route([t, t], "c3", **kwargs)
    # With what they need, they run and do what they say.
    clock = (4 << 20, 16 << 20, 0.0, 50_000.0)
    r = route([t, t], "c3", write_clock=clock, hedge_delay_us=100.0, hedge_every_read=True)
    assert r["hedged"] > 0


def test_cli_eval_takes_unknown_phase(files, capsys):
    import json

    def run(*extra):
        rc = cli.main(
            ["io", "heimdall", "eval", str(files["trace"]), "--windows", "1", "--window-ios"]
            + ["1200", "--policies", "c3-clock-voted-hedged", "--no-augment", "--no-progress"]
            + ["--json", *extra]
        )
        assert rc == 0
        return json.loads(capsys.readouterr().out)

    known, unknown = run(), run("--unknown-phase")
    assert (known["unknown_phase"], unknown["unknown_phase"]) == (False, True)
    # The replicas were written before the window: the same reads meet other collections.
    pol = "c3-clock-voted-hedged"
    assert known["summary"]["policies"][pol] != unknown["summary"]["policies"][pol]


def test_cli_eval_applies_rerate_and_resize_and_checks_them(files, capsys):
    import json

    def mean(*extra):
        rc = cli.main(
            ["io", "heimdall", "eval", str(files["trace"]), "--windows", "1", "--window-ios"]
            + ["1200", "--policies", "c3", "--no-augment", "--no-progress", "--json", *extra]
        )
        out = json.loads(capsys.readouterr().out)
        return rc, out

    rc, base = mean()
    assert rc == 0
    rc, faster = mean("--rerate", "10")
    assert rc == 0
    assert faster["summary"]["policies"]["c3"] != base["summary"]["policies"]["c3"]
    for bad in (["--rerate", "0"], ["--resize", "-3"]):
        rc, out = mean(*bad)
        assert rc != 0 and out["error"] == "InvalidArgumentError", out
