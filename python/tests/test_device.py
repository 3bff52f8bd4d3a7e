"""attune.device: the SSD profiler (simulated and on real files) and the I/O rule checker."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import namedtuple

import pytest

from attune import device
from attune.device import real
from attune.device.traces import parse_strace
from attune.errors import CorruptionError, InvalidArgumentError, StorageIOError

SMALL = {"file_bytes": 16 << 20, "samples_per_group": 8}
# A tiny real-disk run: 1 MiB files, writes 1..64 KiB, guesses 4..64 KiB.
TINY = {
    "file_bytes": 1 << 20,
    "max_write": 64 << 10,
    "read_bytes": 256 << 10,
    "max_guess": 64 << 10,
    "samples_per_group": 2,
}


def test_simulated_profile_recovers_the_planted_parameters():
    params = {"chunk_bytes": 32768, "page_bytes": 8192, "stripe_chips": 4, "map_fetch_us": 10}
    r = device.profile_simulated(params, SMALL, seed=3)
    assert r["expected"] == {
        "desirable_write": 128 << 10,
        "stripe": 128 << 10,
        "chunk": 32 << 10,
        "page": 8 << 10,
        "hot_offset": 16 << 10,
    }
    assert r["recovered"], r["learned"]
    assert r["learned"]["desirable_write"]["value"] == 128 << 10
    assert r["learned"]["chunk"]["confidence"] > 0.999


def test_without_the_fragment_model_the_stripe_is_not_claimed():
    r = device.profile_simulated({"stripe_chips": 4}, SMALL)
    assert r["learned"]["stripe"]["value"] is None
    assert "no request-size structure" in r["learned"]["stripe"]["reason"]
    assert r["recovered"]  # expected stripe is None too; chunk, page, hot still exact


def test_bad_settings_are_named():
    with pytest.raises(InvalidArgumentError, match="min_write"):
        device.profile_config({"min_write": 1000})
    with pytest.raises(InvalidArgumentError, match="unknown profile setting"):
        device.profile_config({"chunk": 1})
    with pytest.raises(InvalidArgumentError, match="chunk_bytes"):
        device.profile_simulated({"chunk_bytes": 3000}, SMALL)


def test_a_real_directory_run_removes_its_files(tmp_path):
    r = device.profile_path(tmp_path, TINY, rounds=1)
    assert r["source"] == "path"
    assert len(r["size_latencies_ns"]) == 7
    assert set(r["learned"]) == set(device.PARAM_KEYS)
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_run_removes_its_files(tmp_path):
    def stop(done, total):
        if done == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        device.profile_path(tmp_path, TINY, rounds=1, progress=stop)
    assert list(tmp_path.iterdir()) == []


def test_bad_paths_and_too_little_space(tmp_path, monkeypatch):
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        device.profile_path(tmp_path / "missing", TINY)
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(InvalidArgumentError, match="not a directory"):
        device.profile_path(f, TINY)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(1 << 30, 1 << 30, 1 << 20))
    with pytest.raises(InvalidArgumentError, match="too little free space"):
        real.check_path(tmp_path, 8 << 20)


STRACE = """\
openat(AT_FDCWD, "/data/db.sqlite", O_RDWR|O_CREAT|O_CLOEXEC, 0644) = 3
openat(AT_FDCWD, "/data/db.sqlite-wal", O_RDWR|O_CREAT|O_CLOEXEC, 0644) = 4
pread64(3, "SQLite format 3\\0\\20\\0\\2\\2\\0@ \\40\\0\\0\\0\\2"..., 100, 0) = 100
pread64(3, "\\r\\0\\0\\0\\1\\17\\374\\0\\17\\374\\0\\0\\0\\0\\0\\0"..., 65536, 65536) = 65536
pwrite64(4, "7\\177\\6\\202\\0-\\342\\30\\0\\0\\20\\0\\0\\0\\0\\0"..., 32, 0) = 32
pwrite64(4, "\\0\\0\\0\\2\\0\\0\\0\\0\\, \\"quoted\\"", 24, 32) = 24
pwrite64(4, "\\r\\0\\0\\0"..., 65536, 56) = 65536
[pid  4242] 12:00:01.000001 pwrite64(3, "\\r\\0"..., 65536, 131072) = 65536
lseek(3, 196608, SEEK_SET)              = 196608
write(3, "abc"..., 4096) = 4096
write(3, "abc"..., 4096) = 4096
write(1, "hello\\n", 6) = 6
openat(AT_FDCWD, "/proc/self/status", O_RDONLY) = 5
read(5, "Name:\\tpython\\n"..., 1024) = 1024
pwrite64(3, "x"..., 4096, 0) = -1 ENOSPC (No space left on device)
pread64(3, <unfinished ...>
close(3) = 0
"""


def test_strace_is_parsed_into_file_ios():
    t = parse_strace(STRACE)
    assert t.files == ["/data/db.sqlite", "/data/db.sqlite-wal"]
    assert list(zip(t.file, t.offset, t.size, t.write, strict=True)) == [
        (0, 0, 100, False),
        (0, 65536, 65536, False),
        (1, 0, 32, True),
        (1, 32, 24, True),
        (1, 56, 65536, True),
        (0, 131072, 65536, True),
        (0, 196608, 4096, True),
        (0, 200704, 4096, True),
    ]
    assert t.skipped == 2  # the failed write and the unfinished call
    only = parse_strace(STRACE, only="-wal")
    assert only.files == ["/data/db.sqlite-wal"] and len(only) == 3


PARAMS = {
    "desirable_write": 65536,
    "stripe": 65536,
    "chunk": 65536,
    "page": 16384,
    "hot_offset": 32768,
}


def test_check_finds_the_planted_violations_and_nothing_else():
    t = parse_strace(STRACE)
    r = device.check(t, PARAMS)
    got = sorted((v["index"], v["rule"]) for v in r.violations())
    # 1: a 64 KiB read at offset 0 of a chunk (hot is 32 KiB): rule 2. 2: the 32-byte WAL header
    # at 0: rule 1. 3: a 24-byte frame header at 32: rules 1, 3. 4: a frame at offset 56: rules
    # 3, 4, 5 (5 pages, not 4). 5: an aligned 64 KiB page: none. 6, 7: 4 KiB writes: rule 1;
    # 196608 is stripe-aligned, 200704 is not (rule 3).
    assert got == [(1, 2), (2, 1), (3, 1), (3, 3), (4, 3), (4, 4), (4, 5), (6, 1), (7, 1), (7, 3)]
    assert r.unchecked == []
    assert r.raw["extra_pages_total"] == 1


def test_unknown_parameters_are_reported_as_unchecked():
    t = parse_strace(STRACE)
    r = device.check(t, {"page": 4096})
    assert [u[0] for u in r.unchecked] == [1, 2, 3, 4]
    assert r.counts[:4] == [0, 0, 0, 0]


def test_unreadable_and_malformed_traces(tmp_path):
    with pytest.raises(StorageIOError, match="cannot read trace"):
        device.load_io_trace(tmp_path / "nope.txt")
    bad = tmp_path / "bad.trace"
    bad.write_text("this is not a trace\n")
    with pytest.raises(CorruptionError):
        device.load_io_trace(bad)
    with pytest.raises(CorruptionError, match="strace"):
        device.load_io_trace(bad, "strace")


def _cli(capsys, *args):
    from attune.cli import main

    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_profile_and_check(tmp_path, capsys):
    out = tmp_path / "profile.json"
    rc, stdout, _ = _cli(
        capsys,
        "device",
        "profile",
        "--simulated",
        "--file-mb",
        "16",
        "--samples",
        "8",
        "--out",
        str(out),
        "--json",
        "--plot",
        str(tmp_path / "plot"),
    )
    d = json.loads(stdout)
    assert rc == 0 and d["recovered"] and d["params_learned"]["stripe"] == 256 << 10
    assert all(os.path.exists(x) for x in d["plots"]) and len(d["plots"]) == 2
    trace = tmp_path / "app.strace"
    trace.write_text(STRACE)
    rc, stdout, _ = _cli(capsys, "device", "check", str(trace), "--params", str(out), "--json")
    c = json.loads(stdout)
    # Desirable size 256 KiB: the two 64 KiB writes break rule 1 as well.
    assert c["counts"]["rule1"] == 6 and c["unchecked"] == []
    _, h, _ = _cli(capsys, "device", "check", str(trace), "--param", "page=4096")
    assert "rule 3 (writes start on a stripe boundary): not checked" in h


def test_cli_errors_are_clean():
    # A fresh process, as a user runs it: a clear message, no traceback.
    for args, msg in (
        (["device", "check", "/nonexistent/trace"], "cannot read trace"),
        (["device", "profile", "/nonexistent/dir"], "does not exist"),
    ):
        e = subprocess.run(
            [sys.executable, "-m", "attune.cli", *args], capture_output=True, text=True, check=False
        )
        assert e.returncode != 0 and msg in e.stderr and "Traceback" not in e.stderr
