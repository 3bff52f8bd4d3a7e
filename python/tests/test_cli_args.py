"""Arguments the parser checks itself: numbers out of range and malformed sizes are refused with
a message that names the option and the allowed range, before any work starts."""

import json
import subprocess
import sys

import pytest

from attune.cli import main

ATTUNE = [sys.executable, "-m", "attune.cli"]


@pytest.mark.parametrize(
    "args, names",
    [
        (["workload", "keys", "lognormal", "-5"], ["argument n", "allowed: 0.."]),
        (["workload", "ycsb", "a", "10", "10", "--field-count", "-1"], ["--field-count", "1.."]),
        (["workload", "ycsb", "a", "10", "10", "--field-length", str(2**40)], ["--field-length"]),
        (["demo", "--value-size", "5000000000"], ["--value-size", "1..1048576"]),
        (["demo", "--records", "0"], ["--records", "1.."]),
        (["cache", "mrc", "db", "--points", "-3"], ["--points", ">= 1"]),
        (["split", "in.csv", "--out", "d", "--memory-limit", "bogus"], ["--memory-limit"]),
        (["split", "in.csv", "--out", "d", "--memory-limit", "4GB'; DROP"], ["--memory-limit"]),
        (["split", "in.csv", "--out", "d", "--max-dims", "-1"], ["--max-dims"]),
    ],
)
def test_out_of_range_arguments_name_the_option(args, names, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for n in names:
        assert n in err, err
    assert main([*args, "--json"]) == 2
    obj = json.loads(capsys.readouterr().out)
    assert obj["error"] == "UsageError" and names[0] in obj["message"]


def test_sizes_take_units():
    from attune.cli import size_bytes

    assert size_bytes("4GB") == 4 * 10**9
    assert size_bytes("512MiB") == 512 * 2**20
    assert size_bytes("100") == 100


def test_split_memory_limit_reaches_duckdb_as_a_size(tmp_path):
    pytest.importorskip("duckdb")
    src = tmp_path / "t.csv"
    src.write_text("a,b\n" + "".join(f"{i},{'x' if i % 2 else 'y'}\n" for i in range(200)))
    r = subprocess.run(
        [*ATTUNE, "split", str(src), "--out", str(tmp_path / "o"), "--memory-limit", "64MiB"],
        check=False,
        capture_output=True,
        text=True,
    )
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode in (0, 1), r.stderr  # 1: a refusal (the split would not shrink the data)


def test_interrupted_split_is_exit_130_without_traceback(tmp_path, monkeypatch, capsys):
    import attune.frames

    def interrupted(*_a, **_k):
        raise RuntimeError("Query interrupted")

    monkeypatch.setattr(attune.frames, "split_file", interrupted)
    src = tmp_path / "t.csv"
    src.write_text("a\n1\n")
    pytest.importorskip("duckdb")
    assert main(["split", str(src), "--out", str(tmp_path / "o")]) == 130
    assert capsys.readouterr().err.strip().endswith("attune: interrupted")


def test_an_interrupt_under_json_prints_a_json_error(tmp_path, monkeypatch, capsys):
    """--json output stays JSON when the run is interrupted (Ctrl-C printed nothing on stdout)."""
    import json

    import attune.device

    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(attune.device, "check", interrupted)
    tr = tmp_path / "t.strace"
    tr.write_text('pwrite64(3</tmp/x>, "a"..., 24, 0) = 24\n')
    assert main(["device", "check", str(tr), "--param", "page=4096", "--json"]) == 130
    out = capsys.readouterr()
    assert json.loads(out.out) == {"error": "KeyboardInterrupt", "message": "interrupted"}
    assert out.err.strip().endswith("attune: interrupted")
