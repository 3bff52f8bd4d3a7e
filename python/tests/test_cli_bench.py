"""`attune bench` verbs follow the shared output rules: no bars in a redirected stderr, the
shared flags on `bench report`, the JSON error object on stdout under --json (the harness's own
message wrapped in it), and --json a flag everywhere (`--json FILE` only where it was, deprecated).
"""

import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from attune.cli import main

ATTUNE = [sys.executable, "-m", "attune.cli"]


def _harness():
    from attune.bench import BenchError, find_binary

    try:
        return find_binary()
    except BenchError:
        pytest.skip("attune-bench is not built")


def _attune(*args):
    return subprocess.run([*ATTUNE, *args], capture_output=True, text=True, check=False)


def test_no_progress_bars_when_stderr_is_not_a_terminal(tmp_path):
    _harness()
    r = _attune(
        "bench", "micro", "--engines", "attune", "--benchmarks", "fillseq",
        "--records", "2000", "--dir", str(tmp_path / "d"),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "\r" not in r.stderr and "it/s" not in r.stderr and "op/s]" not in r.stderr, r.stderr


def test_report_takes_the_shared_flags(tmp_path):
    rows = tmp_path / "r.jsonl"
    rows.write_text(json.dumps({"engine": "rocksdb", "workload": "a", "ops_per_sec": 1.0}) + "\n")
    r = _attune("bench", "report", str(rows), "--out", str(tmp_path / "r.md"), "--no-progress")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "r.md").exists()


@pytest.mark.parametrize(
    "args, code",
    [
        (["bench", "micro", "--engines", "foo", "--records", "1000"], 2),
        (["bench", "cache-sim", "--mode", "policies", "--memory-mib", "8"], None),
        (["bench", "splitdf", "bogus"], 2),
        (["bench", "report", "x.jsonl"], 2),
        (["bench", "engines", "--json", "/tmp/e.jsonl"], 2),
    ],
)
def test_bench_failures_under_json_are_one_json_object(args, code, tmp_path):
    if args[1] not in ("splitdf", "report"):
        _harness()
    r = subprocess.run(
        [*ATTUNE, *args, "--json"], capture_output=True, text=True, check=False, cwd=tmp_path
    )
    if code is None and r.returncode == 0:
        pytest.skip("this machine runs it")
    assert r.returncode != 0
    if code is not None:
        assert r.returncode == code
    obj = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(obj) >= {"error", "message"} and obj["message"], r.stdout
    assert "Traceback" not in r.stderr


def test_harness_message_is_wrapped_into_the_json_error(capsys):
    _harness()
    code = main(["bench", "micro", "--engines", "foo", "--records", "1000", "--json"])
    assert code == 2
    obj = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert "foo" in obj["message"]


def test_legacy_json_file_still_works_on_micro_and_says_it_is_deprecated(tmp_path):
    _harness()
    out = tmp_path / "m.jsonl"
    r = _attune(
        "bench", "micro", "--engines", "attune", "--benchmarks", "fillseq",
        "--records", "1000", "--dir", str(tmp_path / "d"), "--json", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "deprecated" in r.stderr
    assert out.read_text().strip()


def test_report_baseline_must_be_in_the_results(tmp_path, capsys):
    rows = tmp_path / "r.jsonl"
    rows.write_text(json.dumps({"engine": "rocksdb", "workload": "a", "ops_per_sec": 1.0}) + "\n")
    out = str(tmp_path / "r.md")
    assert main(["bench", "report", str(rows), "--out", out, "--baseline", "nosuch"]) == 2
    assert "nosuch" in capsys.readouterr().err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_removes_the_harness_temporary_directory(sig):
    binary = _harness()
    proc = subprocess.Popen(
        [str(binary), "kv", "micro", "--engines", "attune", "--benchmarks", "fillrandom",
         "--records", "20000000", "--no-progress"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # A test run in a background job inherits an ignored SIGINT; the harness must see it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
    )  # fmt: skip
    tmp = Path(tempfile.gettempdir()) / f"attune-bench-{proc.pid}"
    deadline = time.monotonic() + 60
    while not any(tmp.glob("*/*")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert tmp.parent.exists()
    assert proc.returncode == 128 + sig, err
    assert not tmp.exists(), err
    assert "interrupted" in err
