"""The `attune` command line for the key-value engine."""

import json
import subprocess
import sys

ATTUNE = [sys.executable, "-m", "attune.cli"]


def run(*args, check=True):
    return subprocess.run([*ATTUNE, *args], capture_output=True, text=True, check=check)


def test_demo_runs_small_and_reports_json(tmp_path):
    out = run("demo", "--records", "20000", "--operations", "5000", "--json")
    r = json.loads(out.stdout)
    assert r["records"] == 20000
    assert r["mix_ops_per_sec"] > 0
    assert r["read_latency_us"]["p99"] >= r["read_latency_us"]["p50"] > 0


def test_put_get_scan_verify(tmp_path):
    db = str(tmp_path / "db")
    run("kv", "put", db, "hello", "world")
    assert run("kv", "get", db, "hello").stdout.strip() == "world"
    assert json.loads(run("kv", "verify", db, "--json").stdout)["ok"] is True
    lines = run("kv", "scan", db).stdout.splitlines()
    assert lines == ["hello\tworld"]


def test_missing_database_is_a_clear_error_without_traceback(tmp_path):
    r = run("kv", "stats", str(tmp_path / "nope"), check=False)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    assert "create_if_missing" in r.stderr


def test_help_lists_verbs():
    out = run("--help").stdout
    assert "demo" in out and "kv" in out


def test_gc_verb_reports_json(tmp_path):
    path = str(tmp_path / "db")
    import attune

    with attune.DB(path, min_blob_size="100", blob_file_size="16KiB") as db:
        for rnd in range(3):
            for i in range(100):
                db.put(b"k%03d" % i, b"%d" % rnd + b"v" * 300)
        db.compact()
    r = json.loads(run("kv", "gc", path, "--ratio", "0.1", "--json").stdout)
    assert r["segments_collected"] > 0
    assert r["blob_bytes_after"] < r["blob_bytes_before"]
    assert "--ratio" in run("kv", "gc", "--help").stdout
