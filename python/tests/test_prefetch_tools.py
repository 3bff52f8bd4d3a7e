"""The prefetching tools' edges: every bad argument, file and trace is a catchable
``attune.Error`` naming what was wrong (Python API and ``attune io prefetch``), the same input
gets the same class everywhere, and the evaluator charges every measured hit."""

from __future__ import annotations

import json
import pathlib
import struct
import subprocess
import sys

import numpy as np
import pytest

import attune
from attune.io import heimdall
from attune.io import prefetch as pf


@pytest.fixture(scope="module")
def trained() -> pf.TrainResult:
    x, y = pf.synthetic_sequences(5_000, seed=3)
    return pf.train(x, y, epochs=1, seed=3)


@pytest.fixture(scope="module")
def files(tmp_path_factory, trained):
    d = tmp_path_factory.mktemp("pf")
    good = d / "good.bin"
    trained.save(good)
    flip = bytearray(trained.to_bytes())
    flip[200] ^= 0x40
    (d / "flip.bin").write_bytes(bytes(flip))
    heim = heimdall.Mlp(
        [np.zeros((4, 11), np.float32), np.zeros((1, 4), np.float32)],
        [np.zeros(4, np.float32), np.zeros(1, np.float32)],
        np.zeros(11, np.float32),
        np.ones(11, np.float32),
    )
    (d / "heimdall.bin").write_bytes(heim.to_bytes())
    v2 = bytearray(trained.to_bytes()[:-4])
    v2[8:10] = struct.pack("<H", 7)
    v2 += struct.pack("<I", heimdall.crc32c(bytes(v2)))
    (d / "v7.bin").write_bytes(bytes(v2))
    rows = [f"{i * 0.5:.3f} 0 {(i % 97) * 65536 + (i // 97) * 4096} 4096 1" for i in range(400)]
    (d / "ok.trace").write_text("\n".join(rows) + "\n")
    (d / "neg.trace").write_text("0.0 0 4096 4096 1\n0.5 0 -4096 4096 1\n")
    (d / "empty.trace").write_text("")
    (d / "fake.csv.gz").write_text("version,time,op,size,lbn\n1,10,28,512,8\n")
    return d


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "attune.cli", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
    )


def _clean_failure(r, *needles):
    assert r.returncode != 0, r.stdout
    assert "Traceback" not in r.stderr, r.stderr
    out = r.stderr + r.stdout  # under --json the error is one JSON object on stdout
    for n in needles:
        assert n in out, out


# ---------------------------------------------------------------- 1. no tracebacks, no aborts
@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: pf.synthetic_trace("mixed", 10**12), "n"),
        (lambda: pf.synthetic_trace("mixed", -1), "n"),
        (lambda: pf.synthetic_trace("mixed", 100, jobs=-1), "jobs"),
        (lambda: pf.synthetic_trace("mixed", 100, seed=-1), "seed"),
        (lambda: pf.synthetic_sequences(10, seed=-1), "seed"),
        (lambda: pf.training_set([], synthetic=-5), "synthetic"),
        (lambda: pf.train(np.zeros((5, 10)), np.zeros(5), seed=-1), "seed"),
        (lambda: pf.train(np.zeros((5, 10)), np.zeros(5), epochs=0), "epochs"),
        (lambda: pf.train(np.zeros((5, 10)), np.zeros(5), epochs=-1), "epochs"),
        (
            lambda: pf.evaluate(pf.synthetic_trace("seq", 100), ["none"], measure_from=-1),
            "measure_from",
        ),
        (lambda: pf.evaluate(pf.synthetic_trace("seq", 100), ["tinfetch"], 3.5), "model"),
    ],
)
def test_bad_arguments_raise_invalid_argument_naming_it(call, name):
    with pytest.raises(attune.InvalidArgumentError, match=rf"\b{name}\b"):
        call()


def test_evaluate_takes_a_path_bytes_or_a_train_result(files, trained):
    t = pf.synthetic_trace("stride", 2_000, jobs=2, seed=1)
    want = pf.evaluate(t, ["tinfetch"], trained.to_bytes())
    for m in (trained, str(files / "good.bin"), files / "good.bin"):
        assert pf.evaluate(t, ["tinfetch"], m) == want


def test_method_names_are_case_insensitive_as_in_the_engine(trained):
    t = pf.synthetic_trace("seq", 500)
    (a,) = pf.evaluate(t, ["TinFetch"], trained)
    assert a["method"] == "tinfetch"


def test_nan_training_data_is_refused_before_a_model_exists():
    x = np.full((50, 10), np.nan)
    with pytest.raises(attune.InvalidArgumentError, match="non-finite"):
        pf.train(x, np.zeros(50), epochs=1)


def test_cli_refuses_bad_numbers_without_a_traceback(files):
    trace = files / "ok.trace"
    for flags, needle in [
        (["--seed", "-1"], "-1 is negative"),
        (["--seed", "-1", "--json"], "-1 is negative"),
        (["--epochs", "0"], "--epochs"),
        (["--epochs", "-1"], "--epochs"),
        (["--synthetic-rows", "-5"], "-5 is negative"),
    ]:
        r = _cli("io", "prefetch", "train", trace, "--out", files / "x.bin", *flags)
        _clean_failure(r, needle)
    assert not (files / "x.bin").exists()
    r = _cli("io", "prefetch", "eval", trace, "--seed", "-2", "--no-lstm")
    _clean_failure(r, "-2 is negative")


# ---------------------------------------------------------------- 2. errors name the file
def test_a_malformed_trace_names_its_file_and_line(files):
    r = _cli("io", "prefetch", "train", files / "ok.trace", files / "neg.trace", "--out", "x.bin")
    _clean_failure(r, "neg.trace", "line 2", "offset `-4096` is negative")
    with pytest.raises(attune.CorruptionError, match="neg.trace.*line 2") as e:
        attune.io.load_trace(files / "neg.trace")
    assert e.value.path == str(files / "neg.trace")


def test_a_gz_name_without_gzip_says_not_gzip(files):
    with pytest.raises(attune.CorruptionError, match="not gzip"):
        attune.io.load_trace(files / "fake.csv.gz")


@pytest.mark.parametrize(
    "name, cls",
    [
        ("flip.bin", attune.CorruptionError),
        ("heimdall.bin", attune.InvalidArgumentError),
        ("v7.bin", attune.UnsupportedVersionError),
    ],
)
def test_a_bad_model_gets_one_class_everywhere_naming_the_path(tmp_path, files, name, cls):
    path = files / name
    with pytest.raises(cls, match=name):
        pf.load_model(path)
    with pytest.raises(cls, match=name):
        attune.DB(str(tmp_path / "db"), prefetcher="tinfetch", prefetch_model=str(path))
    with pytest.raises(cls):
        pf.evaluate(pf.synthetic_trace("seq", 100), ["tinfetch"], path.read_bytes())
    r = _cli("io", "prefetch", "eval", files / "ok.trace", "--model", path, "--json", "--no-lstm")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    err = json.loads(r.stdout or r.stderr)
    assert name in json.dumps(err), err


def test_the_engine_names_one_position_for_a_damaged_model(tmp_path, files):
    with pytest.raises(attune.CorruptionError) as e:
        attune.DB(str(tmp_path / "db"), prefetcher="tinfetch", prefetch_model=files / "flip.bin")
    msg = str(e.value)
    assert "offset 0" not in msg and "at byte" not in msg, msg
    assert e.value.offset and f"offset {e.value.offset}" in msg, msg


# ---------------------------------------------------------------- 3. refuse what is not usable
def test_empty_traces_are_refused_by_train_and_eval(files):
    empty = files / "empty.trace"
    r = _cli("io", "prefetch", "train", empty, "--out", files / "e.bin")
    _clean_failure(r, "empty.trace", "no I/Os")
    r = _cli("io", "prefetch", "eval", empty, "--model", files / "good.bin")
    _clean_failure(r, "empty.trace", "no I/Os")
    r = _cli("io", "prefetch", "eval", empty)
    _clean_failure(r, "no I/Os")
    assert "LSTM" not in r.stderr


def test_an_unwritable_out_is_refused_before_training(files, tmp_path):
    r = _cli("io", "prefetch", "train", files / "ok.trace", "--out", tmp_path / "nodir" / "x.bin")
    _clean_failure(r, "cannot write model", "nodir")


# ---------------------------------------------------------------- 4. options, help
def test_prefetch_model_takes_a_pathlib_path(tmp_path, files):
    db = attune.DB(
        str(tmp_path / "db"), prefetcher="tinfetch", prefetch_model=pathlib.Path(files / "good.bin")
    )
    db.put(b"k", b"v")
    assert db.get(b"k") == b"v"
    db.close()


def test_help_mentions_prefetching_without_module_names():
    for args in (["--help"], ["io", "--help"], ["io", "prefetch", "--help"]):
        r = _cli(*args)
        assert r.returncode == 0, r.stderr
        assert "prefetch" in r.stdout
        assert "_cli_prefetch" not in r.stdout and "``" not in r.stdout


# ---------------------------------------------------------------- 5. the evaluator's accounting
def test_timeliness_is_not_applicable_without_prefetching():
    (m,) = pf.evaluate(pf.synthetic_trace("random", 1_000), ["none"])
    assert m["timeliness"] is None


def test_warm_up_prefetches_do_not_count_as_measured_hits():
    t = pf.synthetic_trace("seq", 4_000, jobs=2, seed=0)
    half = len(t) // 2
    for m in pf.evaluate(t, ["readahead", "stride", "markov", "leap"], measure_from=half):
        if m["prefetched_blocks"] == 0:
            assert m["hit_blocks"] == 0, m
        assert m["useful_blocks"] <= m["prefetched_blocks"], m


def test_a_missing_or_unreadable_model_gets_one_class_everywhere(tmp_path):
    """A missing file the caller named is a bad argument; an existing path that cannot be read
    as a file is an I/O error; the engine and load_model agree, and both name the path."""
    missing = tmp_path / "missing.bin"
    unreadable = tmp_path / "a-directory.bin"
    unreadable.mkdir()
    for path, cls in ((missing, attune.InvalidArgumentError), (unreadable, attune.StorageIOError)):
        with pytest.raises(cls, match=path.name):
            pf.load_model(path)
        with pytest.raises(cls, match=path.name):
            attune.DB(str(tmp_path / "db"), prefetcher="tinfetch", prefetch_model=str(path))
