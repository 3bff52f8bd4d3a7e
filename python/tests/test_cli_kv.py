"""The `attune` command line for the key-value engine."""

import json
import math
import subprocess
import sys
from typing import ClassVar

import pytest

ATTUNE = [sys.executable, "-m", "attune.cli"]


def run(*args, check=True):
    return subprocess.run([*ATTUNE, *args], capture_output=True, text=True, check=check)


def _rate_is_well_formed(rate) -> bool:
    """A throughput is a finite number >= 0, or null for a phase too short for the clock: never
    a speed the test demands (a fast machine may finish 5,000 operations in no measurable time)."""
    return rate is None or (isinstance(rate, float) and math.isfinite(rate) and rate >= 0)


def test_demo_runs_small_and_reports_json(tmp_path):
    out = run("demo", "--records", "20000", "--operations", "5000", "--json")
    r = json.loads(out.stdout)
    assert r["records"] == 20000 and r["operations"] == 5000
    assert _rate_is_well_formed(r["load_ops_per_sec"])
    assert _rate_is_well_formed(r["mix_ops_per_sec"])
    for lat in (r["read_latency_us"], r["write_latency_us"]):
        assert 0 <= lat["p50"] <= lat["p99"]
    assert r["space_bytes"] > 0


def test_demo_rate_of_an_untimed_phase_is_null_not_zero_or_a_crash():
    from attune._cli_kv import _per_sec, _rate_text

    assert _per_sec(5000, 0) is None
    assert _rate_text(None) == "too fast to time"
    assert _per_sec(5000, 2_500_000) == 2_000_000.0
    assert _per_sec(0, 0) == 0.0


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
    assert "does not exist" in r.stderr


def test_help_lists_verbs():
    out = run("--help").stdout
    assert "demo" in out and "kv" in out


def test_gc_verb_reports_json(tmp_path):
    path = str(tmp_path / "db")
    import attune

    # No automatic GC while writing, so the garbage is still there when the verb runs.
    opts = {"min_blob_size": "100", "blob_file_size": "16KiB", "blob_gc_space_amp": 0}
    with attune.DB(path, **opts) as db:
        for rnd in range(3):
            for i in range(100):
                db.put(b"k%03d" % i, b"%d" % rnd + b"v" * 300)
        db.compact()
        blob_bytes_written = db.stats()["blob_bytes"]
    r = json.loads(run("kv", "gc", path, "--ratio", "0.1", "--json").stdout)
    # The verb opens with the default options, so the background collector may take some of the
    # segments (or all, when it starts first); the report counts both, and the bytes must shrink.
    assert r["segments_collected"] >= 0 and r["background_segments_collected"] >= 0
    assert r["blob_bytes_after"] < blob_bytes_written
    assert "--ratio" in run("kv", "gc", "--help").stdout


def _binary_db(path):
    import attune

    with attune.DB(path) as db:
        db.put(b"clear\x1b[2J\x00", b"\xff\xfe\tend\n")
        db.put(b"caf\xc3\xa9", b"back\\slash")


def test_scan_escapes_binary_so_the_terminal_sees_only_printable_text(tmp_path):
    path = str(tmp_path / "db")
    _binary_db(path)
    out = subprocess.run([*ATTUNE, "kv", "scan", path], capture_output=True, check=True).stdout
    assert out.decode("utf-8").splitlines() == [
        "café\tback\\\\slash",
        "clear\\x1b[2J\\x00\t\\xff\\xfe\\tend\\n",
    ]
    assert b"\x1b" not in out and b"\x00" not in out


def test_scan_raw_writes_the_stored_bytes(tmp_path):
    path = str(tmp_path / "db")
    _binary_db(path)
    out = subprocess.run(
        [*ATTUNE, "kv", "scan", path, "--raw"], capture_output=True, check=True
    ).stdout
    assert out == b"caf\xc3\xa9\tback\\slash\nclear\x1b[2J\x00\t\xff\xfe\tend\n\n"


def test_scan_json_gives_text_or_escaped_text_with_exact_hex(tmp_path):
    path = str(tmp_path / "db")
    _binary_db(path)
    rows = [json.loads(line) for line in run("kv", "scan", path, "--json").stdout.splitlines()]
    assert rows[0] == {"key": "café", "value": "back\\slash"}
    assert rows[1]["key"] == "clear\x1b[2J\x00", "valid UTF-8 stays text (JSON escapes it)"
    assert rows[1]["value"] == "\\xff\\xfe\\tend\\n"
    assert bytes.fromhex(rows[1]["value_hex"]) == b"\xff\xfe\tend\n"
    assert "key_hex" not in rows[1]


def test_get_escapes_by_default_and_raw_and_json_are_exact(tmp_path):
    path = str(tmp_path / "db")
    _binary_db(path)
    key = "caf\xe9"
    assert run("kv", "get", path, "clear", check=False).returncode == 1, "a prefix is no key"
    assert run("kv", "get", path, key).stdout == "back\\\\slash\n"
    raw = subprocess.run(
        [*ATTUNE, "kv", "get", path, key, "--raw"], capture_output=True, check=True
    )
    assert raw.stdout == b"back\\slash", "exactly the stored bytes, no newline added"
    assert json.loads(run("kv", "get", path, key, "--json").stdout)["value"] == "back\\slash"
    both = run("kv", "get", path, key, "--raw", "--json", check=False)
    assert both.returncode == 1 and json.loads(both.stdout)["error"] == "InvalidArgumentError"


def test_negative_scan_limit_is_refused(tmp_path):
    path = str(tmp_path / "db")
    _binary_db(path)
    r = run("kv", "scan", path, "--limit", "-1", "--json", check=False)
    assert r.returncode == 1 and json.loads(r.stdout)["error"] == "InvalidArgumentError"


def test_escaped_text_is_reversible():
    from attune._cli_kv import escape_bytes

    def unescape(text: str) -> bytes:
        out, i = bytearray(), 0
        named = {"\\": b"\\", "t": b"\t", "n": b"\n", "r": b"\r"}
        while i < len(text):
            if text[i] == "\\":
                if text[i + 1] == "x":
                    out.append(int(text[i + 2 : i + 4], 16))
                    i += 4
                else:
                    out += named[text[i + 1]]
                    i += 2
            else:
                out += text[i].encode()
                i += 1
        return bytes(out)

    for b in [bytes(range(256)), "é\u202e\u200bz".encode(), b"\\x41", b"\xed\xa0\x80"]:
        text = escape_bytes(b)
        assert text.isprintable(), text
        assert unescape(text) == b


GC_REPORT = {
    "segments_collected": 0,
    "records_rewritten": 0,
    "bytes_rewritten": 0,
    "bytes_reclaimed": 0,
    "seconds": 0.01,
    "max_pause_micros": 3,
}


def test_gc_message_credits_the_background_collector_when_the_log_shrank_without_this_call():
    from attune._cli_kv import gc_summary

    r = dict(GC_REPORT, background_segments_collected=3)
    r.update(blob_bytes_before=52_000_000, blob_bytes_after=5_000_000)
    out, err = gc_summary(r, 0.25)
    text = " ".join(out + err)
    assert "background collector collected 3" in text
    assert "52,000,000 -> 5,000,000" in text
    assert "nothing" not in text and "no value-log segment had" not in text and not err


def test_gc_message_says_nothing_was_collected_only_when_nothing_was():
    from attune._cli_kv import gc_summary

    r = dict(GC_REPORT, background_segments_collected=0)
    r.update(blob_bytes_before=1000, blob_bytes_after=1000)
    out, err = gc_summary(r, 0.5)
    assert out == [
        "no value-log segment had enough garbage at ratio 0.5; value log 1,000 B, unchanged"
    ]
    assert err == ["lower --ratio to move segments with less garbage"]
    r.update(segments_collected=2, records_rewritten=10, bytes_rewritten=500)
    r.update(blob_bytes_after=400)
    out, err = gc_summary(r, None)
    assert out[0].startswith("collected 2 value-log segments") and "1,000 -> 400 B" in out[0]
    assert err == []


class _FakeDB:
    """Stands in for attune.DB in the CLI: stats before/after and what verify() returns."""

    verify_result: ClassVar[dict] = {}
    stats_seq: ClassVar[list] = []

    def __init__(self, path, **options):
        self.stats_calls = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def verify(self):
        return dict(self.verify_result)

    def gc(self, ratio=None):
        return {k: GC_REPORT[k] for k in ("segments_collected", "records_rewritten")} | {
            "bytes_rewritten": 0,
            "bytes_reclaimed": 0,
        }

    def stats(self):
        s = type(self).stats_seq[self.stats_calls]
        self.stats_calls += 1
        return s


def test_gc_verb_reports_background_collection_in_json_and_text(monkeypatch, capsys):
    import attune
    from attune.cli import main

    before = {"blob_bytes": 52_000_000, "gc_segments_collected": 4, "gc_max_pause_micros": 0}
    after = {"blob_bytes": 5_000_000, "gc_segments_collected": 9, "gc_max_pause_micros": 7}
    monkeypatch.setattr(_FakeDB, "stats_seq", [before, after])
    monkeypatch.setattr(attune, "DB", _FakeDB)
    assert main(["kv", "gc", "db", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["segments_collected"] == 0 and r["background_segments_collected"] == 5
    assert main(["kv", "gc", "db"]) == 0
    cap = capsys.readouterr()
    assert "background collector collected 5 value-log segments" in cap.out
    assert "nothing" not in cap.out + cap.err


@pytest.mark.parametrize(
    "result, text",
    [
        ({"files": 5, "entries": 10}, "OK: 5 files (tables and value-log segments), 10 entries"),
        (
            {"files": 5, "tables": 3, "blob_segments": 2, "entries": 10},
            "OK: 3 tables, 2 value-log segments, 10 entries",
        ),
        (
            {"files": 1, "tables": 1, "blob_segments": 0, "entries": 10},
            "OK: 1 table, 0 value-log segments, 10 entries",
        ),
    ],
)
def test_verify_counts_tables_and_value_log_segments_apart(monkeypatch, capsys, result, text):
    import attune
    from attune.cli import main

    monkeypatch.setattr(_FakeDB, "verify_result", result)
    monkeypatch.setattr(attune, "DB", _FakeDB)
    assert main(["kv", "verify", "db"]) == 0
    assert capsys.readouterr().out.startswith(text)


def test_verify_of_a_database_with_a_value_log(tmp_path):
    import attune

    path = str(tmp_path / "db")
    with attune.DB(path, min_blob_size="100") as db:
        db.put(b"small", b"v")
        db.put(b"big", b"x" * 1000)
        db.flush()
    out = run("kv", "verify", path).stdout
    assert out.startswith("OK: ") and "table files" not in out
    assert "value-log segment" in out


def test_hex_keys_and_values_round_trip_binary_bytes(tmp_path):
    path = str(tmp_path / "db")
    run("kv", "put", path, "00ff0a", "dead00beef", "--hex")
    run("kv", "put", path, "0x01", "61", "--hex")
    assert run("kv", "get", path, "00ff0a", "--hex").stdout == "dead00beef\n"
    raw = subprocess.run(
        [*ATTUNE, "kv", "get", path, "01", "--hex"], capture_output=True, check=True
    )
    assert raw.stdout == b"61\n"
    obj = json.loads(run("kv", "get", path, "00ff0a", "--hex", "--json").stdout)
    assert obj["value"] == "dead00beef"
    scan = run("kv", "scan", path, "--hex").stdout.splitlines()
    assert scan == ["00ff0a\tdead00beef", "01\t61"]
    assert run("kv", "scan", path, "--hex", "--start", "01").stdout == "01\t61\n"
    assert run("kv", "scan", path, "--hex", "--end", "01").stdout == "00ff0a\tdead00beef\n"
    rows = [json.loads(x) for x in run("kv", "scan", path, "--hex", "--json").stdout.splitlines()]
    assert rows[0] == {"key": "00ff0a", "value": "dead00beef"}
    bad = run("kv", "get", path, "xyz", "--hex", "--json", check=False)
    assert bad.returncode == 1 and "hex" in json.loads(bad.stdout)["message"]


def test_stats_without_json_is_an_aligned_table(tmp_path):
    path = str(tmp_path / "db")
    run("kv", "put", path, "k", "v")
    lines = run("kv", "stats", path).stdout.splitlines()
    assert lines and all("{" not in x and "[" not in x for x in lines), lines
    cols = {len(x) - len(x[len(x.split()[0]) :].lstrip()) for x in lines if len(x.split()) > 1}
    assert len(cols) == 1, "values start in one column"


def test_checkpoint_verb_writes_a_copy_that_opens(tmp_path):
    import attune

    with attune.DB(tmp_path / "db") as db:
        db[b"k"] = b"v"
    r = run("kv", "checkpoint", str(tmp_path / "db"), str(tmp_path / "cp"), "--json")
    assert json.loads(r.stdout)["dest"] == str(tmp_path / "cp")
    with attune.DB(tmp_path / "cp") as cp:
        assert cp[b"k"] == b"v"
    again = run("kv", "checkpoint", str(tmp_path / "db"), str(tmp_path / "cp"), check=False)
    assert again.returncode != 0 and "not empty" in again.stderr
    assert "Traceback" not in again.stderr


def test_delete_verb_removes_a_key_and_a_missing_key_reads_as_null_in_json(tmp_path):
    path = str(tmp_path / "db")
    run("kv", "put", path, "a", "1")
    run("kv", "put", path, "b", "2")
    assert json.loads(run("kv", "delete", path, "a", "--json").stdout) == {"key": "a", "ok": True}
    missing = run("kv", "get", path, "a", "--json", check=False)
    assert missing.returncode == 1
    assert json.loads(missing.stdout) == {
        "key": "a",
        "found": False,
        "value": None,
        "open_mode": "read_only",
    }
    # A delete is a blind write: a key that is not there is not an error.
    assert run("kv", "delete", path, "never-written").returncode == 0
    assert run("kv", "scan", path).stdout == "b\t2\n"
    run("kv", "put", path, "00ff", "78", "--hex")
    run("kv", "delete", path, "0x00ff", "--hex")
    assert run("kv", "get", path, "00ff", "--hex", check=False).returncode == 1
    assert "delete" in run("kv", "--help").stdout


def test_delete_verb_errors_are_named(tmp_path):
    r = run("kv", "delete", str(tmp_path / "nope"), "k", "--json", check=False)
    assert r.returncode == 1 and json.loads(r.stdout)["error"] == "NotADatabaseError"
    path = str(tmp_path / "db")
    run("kv", "put", path, "a", "1")
    r = run("kv", "delete", path, "zz", "--hex", "--json", check=False)
    assert r.returncode == 1 and "hex" in json.loads(r.stdout)["message"]
