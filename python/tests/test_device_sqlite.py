"""The SQLite study on the simulated SSD: strace calls with fsyncs and phase marks, the WAL
rewrite of the chapter's write-aligned-stripes, the page-cache replay, and a small traced run."""

from __future__ import annotations

import errno
import os
import shutil

import pytest

from attune import _native, device
from attune.device import sqlite_study as st
from attune.device.traces import MARK, READ, SYNC, WRITE, parse_strace_calls
from attune.errors import CorruptionError, InvalidArgumentError, StorageIOError

DEVICE = {
    "chunk_bytes": 65536,
    "page_bytes": 16384,
    "stripe_chips": 4,
    "gc_duration_us": 0.0,
}

CALLS = """\
openat(AT_FDCWD, "/w/b.db", O_RDWR|O_CREAT|O_CLOEXEC, 0644) = 3
openat(AT_FDCWD, "/usr/lib/python3/x.py", O_RDONLY) = 4
read(4, "import"..., 4096) = 4096
openat(AT_FDCWD, "/attune-mark/insert-0", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No such file)
openat(AT_FDCWD, "/w/b.db-wal", O_RDWR|O_CREAT|O_CLOEXEC, 0644) = 5
pwrite64(5, "7\\177"..., 32, 0) = 32
pwrite64(5, "\\0\\0"..., 24, 32) = 24
pwrite64(5, "\\r\\0"..., 65536, 56) = 65536
fdatasync(5) = 0
fsync(4) = 0
openat(AT_FDCWD, "/attune-mark/select-0", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No such file)
pread64(3, "\\r"..., 65536, 65536) = 65536
fsync(3) = -1 EIO (Input/output error)
"""


def test_calls_keep_fsyncs_and_marks_of_files_under_the_directory():
    c = parse_strace_calls(CALLS, under="/w/")
    assert c.files == ["/w/b.db", "/w/b.db-wal"]
    assert c.marks == ["insert-0", "select-0"]
    assert list(zip(c.kind, c.file, c.offset, c.size, strict=True)) == [
        (MARK, 0, 0, 0),
        (WRITE, 1, 0, 32),
        (WRITE, 1, 32, 24),
        (WRITE, 1, 56, 65536),
        (SYNC, 1, 0, 0),
        (MARK, 0, 0, 0),
        (READ, 0, 65536, 65536),
    ]
    io = c.io()
    assert len(io) == 4 and io.write == [True, True, True, False]


def test_a_call_without_an_offset_is_a_corrupt_trace():
    with pytest.raises(CorruptionError, match="line 2"):
        parse_strace_calls('openat(AT_FDCWD, "/w/a", O_RDWR) = 3\npwrite64(3, "x") = 1\n')


def test_wal_frames_map_to_whole_pages_with_the_header_in_the_page_tail():
    page = 65536
    frame = page + 24
    # The WAL header stays; frame 0's header goes to the end of slot 1, its page to slot 1.
    assert st.wal_aligned_pieces(0, 32, page) == [(0, 32)]
    assert st.wal_aligned_pieces(32, 24, page) == [(2 * page - 24, 24)]
    assert st.wal_aligned_pieces(56, page, page) == [(page, page)]
    # One write of frames 1 and 2 (header + page each) is split piece by piece.
    off = 32 + frame
    assert st.wal_aligned_pieces(off, 2 * frame, page) == [
        (3 * page - 24, 24),
        (2 * page, page),
        (4 * page - 24, 24),
        (3 * page, page),
    ]


def _wal_calls(frames: int):
    lines = ['openat(AT_FDCWD, "/w/b.db-wal", O_RDWR|O_CREAT, 0644) = 5']
    lines.append('pwrite64(5, "h", 32, 0) = 32')
    for i in range(frames):
        off = 32 + i * (65536 + 24)
        lines.append(f'pwrite64(5, "f", 24, {off}) = 24')
        lines.append(f'pwrite64(5, "p", 65536, {off + 24}) = 65536')
        lines.append("fdatasync(5) = 0")
    return parse_strace_calls("\n".join(lines) + "\n", under="/w/")


def test_aligned_wal_frames_program_no_extra_flash_pages():
    calls = _wal_calls(20)
    orig = st.replay(calls, DEVICE, stripe=1 << 18)
    aligned = st.replay(st.rewrite_wal_aligned(calls, 65536), DEVICE, stripe=1 << 18)
    o_pages = orig["pages_by_role"]["wal"][0]
    a_pages, a_min = aligned["pages_by_role"]["wal"]
    # Each commit of the original writes 65,560 bytes from a 4 KiB OS page that the previous
    # commit left partial: 17 OS pages over 5 flash pages of 16 KiB. Aligned: 4, plus one page
    # for the WAL header once.
    assert o_pages == 5 * 20
    assert (a_pages, a_min) == (4 * 20 + 1, 4 * 20 + 1)


def test_replay_phases_follow_the_marks_and_bad_input_is_named():
    c = parse_strace_calls(CALLS, under="/w/")
    r = st.replay(c, DEVICE, stripe=1 << 18)
    assert list(r["phases"]) == ["setup", "insert-0", "select-0"]
    assert r["phases"]["select-0"]["reads"] == 1
    assert r["phases"]["insert-0"]["writes"] >= 1
    with pytest.raises(InvalidArgumentError, match="file"):
        _native.device_replay_os([0], [2], [0], [10], [0], DEVICE)
    with pytest.raises(InvalidArgumentError, match="kind 9"):
        _native.device_replay_os([9], [0], [0], [10], [0], DEVICE)
    with pytest.raises(InvalidArgumentError, match="differ in length"):
        _native.device_replay_os([0, 0], [0], [0], [10], [0], DEVICE)
    with pytest.raises(InvalidArgumentError, match="stripe"):
        st.replay(c, DEVICE, stripe=0)


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_a_small_traced_sqlite_run_shows_the_chapter_effects(tmp_path):
    kept = tmp_path / "t.strace"
    calls = st.trace_sqlite(rows=3000, iterations=1, ops=60, keep_trace=kept)
    assert kept.stat().st_size > 0
    roles = {st.file_role(p) for p in calls.files}
    assert {"db", "journal"} <= roles
    assert calls.marks == ["insert-0", "select-0", "end"]
    r0 = st.replay(calls, DEVICE, stripe=1 << 18)
    r1 = st.replay(calls, DEVICE, stripe=1 << 18, db_shift=32768, split=True)
    sel0 = st.phase_totals(r0["phases"], "select-")
    sel1 = st.phase_totals(r1["phases"], "select-")
    assert sel0["reads"] == sel1["reads"] > 0
    # Pages at the hot offset span two chips: the same reads take less device time.
    assert sel1["device_ns"] < sel0["device_ns"]
    # The checker reports SQLite's own violations with the learned parameters.
    chk = device.check(
        calls.io(),
        {
            "desirable_write": 1 << 18,
            "stripe": 1 << 18,
            "chunk": 65536,
            "page": 16384,
            "hot_offset": 32768,
        },
    )
    counts = chk.counts
    assert counts[0] > 0  # small writes (journal headers, the database header)
    assert counts[1] > 0  # 64 KiB page reads at chunk-aligned offsets, off the hot location


def test_the_human_report_prints_no_none():
    from attune.bench.device_sqlite import _human

    base = {"case": "x", "ios": 3, "counts": {"rule1": 1}}
    lines = [
        _human({**base, "kind": "check", "extra_pages": 2, "write_amplification": None}),
        _human(
            {**base, "kind": "hot-locations", "select_ops_per_sec": None, "insert_ops_per_sec": 2}
        ),
        _human(
            {
                **base,
                "kind": "hot-locations",
                "select_ops_per_sec": 3.0,
                "insert_ops_per_sec": 2.0,
                "select_gain": 0.3042,
                "insert_gain": -0.152,
            }
        ),
        _human(
            {
                **base,
                "kind": "wal-aligned",
                "wal_flash_pages_per_iteration": 10.0,
                "wal_flash_pages_per_commit": 0.5,
                "insert_ops_per_sec": None,
            }
        ),
    ]
    assert not any("None" in x for x in lines), lines
    assert "baseline" in lines[1] and "baseline" in lines[3]
    assert "+30.4 %" in lines[2] and "-15.2 %" in lines[2]


def test_bad_study_settings_and_a_failed_run_are_clean_errors(monkeypatch):
    with pytest.raises(InvalidArgumentError, match="journal mode"):
        st.trace_sqlite(mode="memory")
    with pytest.raises(InvalidArgumentError, match="page size"):
        st.trace_sqlite(page_bytes=1000)
    with pytest.raises(InvalidArgumentError, match="rows"):
        st.trace_sqlite(rows=0)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(StorageIOError, match="needs strace"):
        st.trace_sqlite()


def test_a_profile_that_fails_while_writing_removes_its_files(tmp_path, monkeypatch):
    from test_device import TINY

    real_fsync = os.fsync
    for code, error, text in (
        (errno.EIO, StorageIOError, "Input/output error"),
        (errno.ENOSPC, StorageIOError, "ran out of space"),
    ):
        calls = {"n": 0}

        def failing(fd, code=code, calls=calls):
            calls["n"] += 1
            if calls["n"] == 5:
                raise OSError(code, os.strerror(code))
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", failing)
        with pytest.raises(error, match=text):
            device.profile_path(tmp_path, TINY, rounds=1)
        assert list(tmp_path.iterdir()) == []
