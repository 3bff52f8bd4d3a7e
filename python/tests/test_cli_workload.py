"""`attune workload trace` without --out: the trace goes to stdout, as its help says."""

import json
import subprocess
import sys

from attune import workload as wl
from attune.cli import main

ATTUNE = [sys.executable, "-m", "attune.cli"]
TRACE = ["workload", "trace", "seq", "random", "--count", "300", "--seed", "5"]


def test_csv_trace_without_out_goes_to_stdout_and_matches_the_file(tmp_path, capsys):
    assert main([*TRACE, "--fmt", "csv"]) == 0
    streamed = capsys.readouterr().out
    out = tmp_path / "t.csv"
    assert main([*TRACE, "--fmt", "csv", "--out", str(out)]) == 0
    assert capsys.readouterr().out == f"wrote 300 records to {out}\n"
    assert streamed == out.read_text()
    (tmp_path / "s.csv").write_text(streamed)
    assert list(wl.read_trace(tmp_path / "s.csv")) == list(wl.read_trace(out))


def test_binary_trace_goes_to_a_redirected_stdout(tmp_path):
    out = tmp_path / "t.bin"
    assert main([*TRACE, "--out", str(out)]) == 0
    streamed = subprocess.run([*ATTUNE, *TRACE], capture_output=True, check=True).stdout
    assert streamed == out.read_bytes()


def test_json_without_out_prints_only_the_summary(capsys):
    assert main([*TRACE, "--fmt", "csv", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary == {"records": 300, "out": None, "fmt": "csv", "seed": 5}


def test_help_says_stdout():
    text = subprocess.run(
        [*ATTUNE, "workload", "trace", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "stdout" in text


def test_out_appends_like_every_verb(tmp_path):
    out = tmp_path / "keys.txt"
    for _ in range(2):
        assert main(["workload", "keys", "seg1", "5", "--out", str(out), "--no-progress"]) == 0
    assert len(out.read_text().splitlines()) == 10
    csv = tmp_path / "t.csv"
    for _ in range(2):
        assert main([*TRACE, "--fmt", "csv", "--out", str(csv), "--no-progress"]) == 0
    lines = csv.read_text().splitlines()
    assert sum(1 for x in lines if x.startswith("timestamp_ns")) == 1, "one header"
