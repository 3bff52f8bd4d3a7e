"""How every `attune` verb fails: one JSON object under --json, a one-line message otherwise, no
traceback, and a quiet exit when the reader of its output goes away."""

import json
import subprocess
import sys

import pytest

from attune.cli import EXIT_BROKEN_PIPE, main

ATTUNE = [sys.executable, "-m", "attune.cli"]


@pytest.mark.parametrize(
    "args, error, code",
    [
        # an attune.Error from the engine
        (["kv", "stats", "{tmp}/missing-db"], "NotADatabaseError", 1),
        # a bad argument the verb validates itself
        (["cache", "mrc", "{tmp}/db", "--reads", "0"], "InvalidArgumentError", 1),
        # a file that cannot be written
        (["workload", "keys", "seg1", "5", "--out", "{tmp}/no/such/dir/k.txt"], None, 1),
        # a file that cannot be read
        (["bench", "report", "{tmp}/missing.jsonl", "--out", "{tmp}/r.md"], None, 1),
        # argparse's own checks
        (["kv", "scan", "{tmp}/db", "--limit", "many"], "UsageError", 2),
        (["workload", "requests", "uniform", "ten", "5"], "UsageError", 2),
    ],
)
def test_failure_under_json_is_one_json_object(tmp_path, capsys, args, error, code):
    import attune

    with attune.DB(str(tmp_path / "db")) as db:
        db.put(b"k", b"v")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert main([*argv, "--json"]) == code
    out = capsys.readouterr().out
    obj = json.loads(out)  # exactly one object: json.loads rejects anything after it
    assert set(obj) >= {"error", "message"} and obj["message"]
    if error:
        assert obj["error"] == error
    assert "Traceback" not in out


def test_missing_input_file_is_an_error_with_the_file_name(tmp_path, capsys):
    missing = str(tmp_path / "missing.jsonl")
    code = main(["bench", "report", missing, "--out", str(tmp_path / "r.md"), "--json"])
    assert code == 1
    obj = json.loads(capsys.readouterr().out)
    assert missing in obj["message"]


def test_failure_without_json_is_one_line_on_stderr(tmp_path, capsys):
    assert main(["workload", "keys", "seg1", "5", "--out", str(tmp_path / "no/dir/k")]) == 1
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err.startswith("attune: error: No such file or directory: ")
    assert cap.err.count("\n") == 1


def test_usage_error_without_json_looks_like_argparse(capsys):
    assert main(["kv", "scan", "db", "--limit", "many"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: attune kv scan")
    assert "attune kv scan: error: argument --limit: invalid int value: 'many'" in err


def _db_with_many_keys(path) -> None:
    import attune

    with attune.DB(path) as db:
        batch = attune.WriteBatch()
        for i in range(50_000):  # ~2.5 MB of output: far more than a pipe holds
            batch.put(b"key%08d" % i, b"value-%08d" % i)
        db.write(batch)


@pytest.mark.parametrize(
    "verb",
    [
        ["kv", "scan", "{db}"],
        ["kv", "scan", "{db}", "--json"],
        ["workload", "requests", "uniform", "1000", "500000"],
        ["workload", "trace", "random", "--count", "200000", "--fmt", "csv"],
    ],
)
def test_closed_pipe_ends_the_verb_quietly(tmp_path, verb):
    db = str(tmp_path / "db")
    _db_with_many_keys(db)
    argv = [a.replace("{db}", db) for a in verb]
    # `attune ... | head -1`: read one line, then close the pipe. The verb has megabytes left
    # to write, more than the pipe buffers, so its next write fails whatever the timing.
    proc = subprocess.Popen([*ATTUNE, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=120)
    assert first.strip()
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert code == EXIT_BROKEN_PIPE
