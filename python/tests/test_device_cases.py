"""Device profiler and rule checker: the cases an outside user hit (4 KiB-sector devices, small
or unmeasurable stripes, multi-threaded strace logs, O_APPEND/dup/vectored I/O, bad inputs,
killed runs)."""

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
TINY = {
    "file_bytes": 1 << 20,
    "max_write": 64 << 10,
    "read_bytes": 256 << 10,
    "max_guess": 64 << 10,
    "samples_per_group": 2,
}


def _cli(capsys, *args):
    from attune.cli import main

    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def _run(*args):
    return subprocess.run(
        [sys.executable, "-m", "attune.cli", *args], capture_output=True, text=True, check=False
    )


# --- 1. a 4 KiB-sector device ---------------------------------------------------------------


def test_a_4k_alignment_raises_the_unit_and_the_smallest_guess(tmp_path, monkeypatch):
    monkeypatch.setattr(real, "_direct_unit", lambda path: 4096)
    r = device.profile_path(tmp_path, TINY, rounds=1)
    assert r["guesses"][0][0] == 8192
    assert all(u == 4096 for _, u, _ in r["guesses"])
    assert any("raised" in n and "8192" in n for n in r["notes"]), r["notes"]
    assert list(tmp_path.iterdir()) == []


def test_cli_min_guess_and_early_guess_range_error(capsys):
    rc, out, _ = _cli(
        capsys,
        "device",
        "profile",
        "--simulated",
        "--file-mb",
        "16",
        "--samples",
        "2",
        "--min-guess-kb",
        "8",
        "--json",
    )
    assert rc == 0
    assert json.loads(out)["found"] >= 1
    # A guess range that cannot work names min_guess, not max_guess.
    with pytest.raises(InvalidArgumentError, match="min_guess"):
        device.profile_config({"offset_unit": 4096, "min_guess": 4096})


# --- 2. small or unmeasurable stripes ---------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        {"page_bytes": 4096},
        {"chunk_bytes": 262144},
        {"chunk_bytes": 32768, "stripe_chips": 0},
    ],
)
def test_small_or_unmeasurable_stripes(params):
    p = {"stripe_chips": 4, "map_fetch_us": 10, **params}
    r = device.profile_simulated(p, SMALL, seed=1)
    st = r["learned"]["stripe"]
    assert st["value"] == r["expected"]["stripe"], st["reason"]
    if st["value"] is None:
        assert st["confidence"] == 0.0
    assert r["recovered"], r["learned"]


def test_cli_says_what_was_found_instead(capsys):
    rc, out, _ = _cli(
        capsys,
        "device",
        "profile",
        "--simulated",
        "--set",
        "chunk_bytes=262144",
        "--file-mb",
        "16",
        "--samples",
        "8",
    )
    assert rc == 0
    assert "MISSED" not in out and "FALSE POSITIVE" not in out, out
    assert "not measurable" in out


def test_one_chip_claims_no_chunk_and_the_verdict_is_right(capsys):
    rc, out, _ = _cli(
        capsys,
        *("device", "profile", "--simulated", "--file-mb", "16", "--samples", "8"),
        *("--set", "channels=1", "--set", "chips_per_channel=1", "--set", "stripe_chips=1"),
        "--no-progress",
    )
    assert rc == 0
    chunk = next(line for line in out.splitlines() if line.strip().startswith("chunk"))
    assert "not found" in chunk and "confidence 0.000" in chunk and "right" in chunk, out
    assert "not separable" in out
    # The hot offset cannot be placed without the chunk: not found, with its readings.
    hot = next(line for line in out.splitlines() if line.strip().startswith("hot_offset"))
    assert "not found" in hot and "right" in hot, out
    assert "--max-guess-kb" in out
    assert "MISSED" not in out and "FALSE POSITIVE" not in out, out
    assert "recovered exactly: yes" in out


def test_a_page_equal_to_the_chunk_is_expected_unseen(capsys):
    rc, out, _ = _cli(
        capsys,
        *("device", "profile", "--simulated", "--file-mb", "16", "--samples", "8"),
        *("--set", "chunk_bytes=8192", "--set", "page_bytes=8192", "--no-progress"),
    )
    assert rc == 0
    assert "MISSED" not in out and "found not found" not in out, out
    assert "recovered exactly: yes" in out


def test_a_page_below_the_default_mapping_unit_needs_no_second_setting():
    r = device.profile_simulated(
        {"stripe_chips": 4, "map_fetch_us": 10, "page_bytes": 2048, "chunk_bytes": 8192}, SMALL
    )
    assert r["learned"]["page"]["value"] == 2048 and r["recovered"], r["learned"]


def test_hot_offset_with_page_equal_chunk_or_one_channel():
    one_channel = {"channels": 1, "chips_per_channel": 8}
    for p, want in (
        ({"page_bytes": 65536}, 32768),
        (one_channel, 32768),
        # One channel queues chip b's transfers behind chip a's: not half the chunk.
        ({**one_channel, "chunk_bytes": 131072}, 81920),
        ({**one_channel, "page_bytes": 65536}, None),
    ):
        r = device.profile_simulated({"stripe_chips": 4, "map_fetch_us": 10, **p}, SMALL)
        assert r["expected"]["hot_offset"] == want, p
        assert r["learned"]["hot_offset"]["value"] == want, r["learned"]["hot_offset"]
        assert r["recovered"], r["learned"]


def test_the_planted_comparison_includes_the_desirable_write_size(capsys):
    rc, out, _ = _cli(
        capsys,
        *("device", "profile", "--simulated", "--file-mb", "16", "--samples", "8"),
        "--no-progress",
    )
    assert rc == 0
    line = next(x for x in out.splitlines() if x.strip().startswith("desirable_write"))
    assert "planted" in line and "exact" in line, out
    # 256 KiB below a planted 1 MiB stripe whose edge is unresolved is not claimed.
    r = device.profile_simulated(
        {"chunk_bytes": 262144, "stripe_chips": 4, "map_fetch_us": 2}, SMALL
    )
    assert r["learned"]["desirable_write"]["value"] in (None, 1 << 20), r["learned"]
    assert r["expected"]["desirable_write"] is None and r["recovered"]


def test_huge_files_are_refused_before_any_order_is_built():
    with pytest.raises(InvalidArgumentError, match="file_bytes"):
        device.profile_config({"file_bytes": 1 << 50})
    cfg = device.profile_config({"file_bytes": 1 << 40})
    assert all(len(v) == 16 for v in cfg["sampled_chunks"].values())


def test_simulated_files_must_fit_the_capacity():
    with pytest.raises(InvalidArgumentError, match="capacity_bytes"):
        device.profile_simulated({"capacity_bytes": 1 << 20}, SMALL)


def _limit_memory():
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


@pytest.mark.parametrize("mib", ["3000000", "100000000"])
@pytest.mark.parametrize("where", [["--simulated"], ["PATH"]])
def test_cli_refuses_files_too_large_before_allocating(tmp_path, where, mib):
    # The random orders grow with --file-mb: the CLI refuses sizes beyond the simulated
    # capacity or the file system before building them, under a 4 GiB address-space limit.
    args = [str(tmp_path) if w == "PATH" else w for w in where]
    e = subprocess.run(
        [sys.executable, "-m", "attune.cli", "device", "profile", *args, "--file-mb", mib],
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=_limit_memory,
    )
    assert e.returncode == 1, (e.returncode, e.stderr)
    assert "Traceback" not in e.stderr and f"--file-mb {mib}" in e.stderr, e.stderr
    want = "--set capacity_bytes" if where == ["--simulated"] else "whole file system"
    assert want in e.stderr, e.stderr


# --- 3. strace: threads, O_APPEND, dup, vectored I/O -----------------------------------------

THREADS = """\
100 openat(AT_FDCWD, "/d/x.bin", O_RDWR|O_CREAT, 0644) = 3
101 pwrite64(3</d/x.bin>, "a"..., 4096, 0 <unfinished ...>
102 pwrite64(3</d/x.bin>, "b"..., 4096, 8192 <unfinished ...>
101 <... pwrite64 resumed>) = 4096
102 <... pwrite64 resumed>) = 4096
[pid 103] 16:00:00.000001 pwrite64(3</d/x.bin>, "c"..., 4096, 16384 <unfinished ...>
[pid 103] 16:00:00.000002 <... pwrite64 resumed>) = 4096 <0.000010>
104 pwrite64(3</d/x.bin>, "d"..., 4096, 32768 <unfinished ...>
this is junk
"""


def test_split_calls_of_threads_are_joined():
    t = parse_strace(THREADS)
    assert t.offset == [0, 8192, 16384]
    assert t.skipped == 1 and "unfinished" in next(iter(t.skipped_by))
    assert t.unreadable == 1


def test_signal_and_exit_lines_of_strace_f_are_not_unreadable():
    # Under `strace -f -tt` strace's own notes carry the pid and time prefixes of calls.
    notes = (
        "100 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED} ---\n"
        "[pid 101] 16:00:00.000003 +++ exited with 0 +++\n"
        "16:00:00.000004 --- SIGINT {si_signo=SIGINT} ---\n"
        "+++ killed by SIGKILL +++\n"
    )
    t = parse_strace(THREADS + notes)
    assert t.unreadable == 1 and t.offset == [0, 8192, 16384]


APPEND = """\
open("/d/log", O_WRONLY|O_APPEND) = 3
write(3, "x"..., 100) = 100
open("/d/new", O_WRONLY|O_CREAT|O_TRUNC|O_APPEND, 0644) = 4
write(4, "x"..., 5000) = 5000
write(4, "x"..., 262144) = 262144
open("/d/old", O_WRONLY|O_APPEND) = 5
lseek(5, 0, SEEK_END) = 5000
write(5, "x"..., 10) = 10
open("/d/f", O_RDWR) = 6
lseek(6, 786432, SEEK_SET) = 786432
dup(6) = 7
write(7, "x"..., 100) = 100
write(6, "x"..., 100) = 100
writev(6, [{iov_base="ab", iov_len=2}, {iov_base="cd", iov_len=2}], 2) = 4
write(6, "x"..., 1) = 1
pwritev(6, [{iov_base="ab", iov_len=2}], 1, 4096) = 2
write(9</d/g>, "x"..., 10) = 10
pwrite64(9</d/g>, "x"..., 10, 40) = 10
"""


def test_append_dup_and_vectored_writes():
    t = parse_strace(APPEND)
    rows = list(zip((t.files[f] for f in t.file), t.offset, t.size, strict=True))
    assert rows == [
        ("/d/new", 0, 5000),
        ("/d/new", 5000, 262144),
        ("/d/old", 5000, 10),
        ("/d/f", 786432, 100),  # through the dup: the shared position
        ("/d/f", 786532, 100),
        ("/d/f", 786632, 4),  # writev advances the position
        ("/d/f", 786636, 1),
        ("/d/f", 4096, 2),
        ("/d/g", 40, 10),  # -y names it: positioned calls are kept
    ]
    assert t.vectored == 2
    assert t.skipped_by == {
        "O_APPEND write to a file of unknown size": 1,
        "descriptor position unknown (opened or duplicated outside the trace)": 1,
    }


def test_a_negative_offset_or_huge_size_is_a_corrupt_trace():
    with pytest.raises(CorruptionError, match="line 1"):
        parse_strace('12345 pwrite64(3</tmp/x>, "aaaa"..., 4, -5) = 4\n')
    with pytest.raises(CorruptionError, match="line 1"):
        parse_strace('pwrite64(3</tmp/x>, "a"..., 4, 99999999999999999999999) = 4\n')


def test_cli_check_prints_skipped_and_gates_ci(tmp_path, capsys):
    tr = tmp_path / "t.strace"
    tr.write_text(THREADS)
    rc, out, _ = _cli(capsys, "device", "check", str(tr), "--param", "stripe=65536")
    assert rc == 0 and "skipped 1 call(s)" in out and "1 line(s)" in out
    rc, out, _ = _cli(
        capsys, "device", "check", str(tr), "--param", "stripe=65536", "--fail-on-violation"
    )
    assert rc == 3
    rc, _, _ = _cli(
        capsys, "device", "check", str(tr), "--param", "stripe=4096", "--fail-on-violation"
    )
    assert rc == 0
    # A profile that found nothing (every parameter null): the gate fails rather than pass.
    nothing = tmp_path / "nothing.json"
    nothing.write_text(
        '{"params_learned": {"desirable_write": null, "stripe": null, "chunk": null, '
        '"page": null, "hot_offset": null}}'
    )
    rc, out, _ = _cli(
        capsys, "device", "check", str(tr), "--params", str(nothing), "--fail-on-violation"
    )
    assert rc == 4 and "no rule could be checked" in out, out
    # Nor a gate over no I/O: a --file filter that matches nothing.
    rc, out, _ = _cli(
        capsys,
        "device",
        "check",
        str(tr),
        "--param",
        "stripe=65536",
        "--file",
        "nomatch",
        "--fail-on-violation",
    )
    assert rc == 4 and "no I/O was checked" in out, out
    rc, out, _ = _cli(capsys, "device", "check", str(tr))
    assert rc == 0 and "give --params" in out, out


# --- 4. bad inputs: attune.Error naming the argument, JSON under --json ----------------------


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (["device", "profile", "--simulated", "--samples", "-3"], "--samples"),
        (["device", "profile", "--simulated", "--seed", "-1"], "--seed"),
        (["device", "profile", "--simulated", "--seed", "99999999999999999999999"], "--seed"),
        (["device", "profile", "/tmp", "--file-mb", "99999999999999"], "--file-mb"),
        (["device", "check", "x", "--param", "page=99999999999999999999999"], "page"),
        (["io", "simulate", "--synthetic", "-5"], "--synthetic"),
        (["io", "simulate", "--synthetic", "0"], "--synthetic"),
        (["io", "simulate", "--synthetic", "100", "--seed", "-1"], "--seed"),
    ],
)
def test_cli_bad_numbers_are_clean(tmp_path, args, name):
    if args[:2] == ["device", "check"]:
        tr = tmp_path / "t.strace"
        tr.write_text(THREADS)
        args = [*args[:2], str(tr), *args[3:]]
    e = _run(*args, "--json")
    assert e.returncode != 0 and "Traceback" not in e.stderr, e.stderr
    d = json.loads(e.stdout)
    assert name in d["message"], d


@pytest.mark.parametrize(
    "config", [{"file_bytes": -1}, {"file_bytes": "16M"}, {"file_bytes": 16.5}, {"seed": 2**64}]
)
def test_api_bad_config_values_are_named(config):
    with pytest.raises(InvalidArgumentError, match=next(iter(config))):
        device.profile_simulated(None, config)


def test_api_bad_seed_and_check_params():
    with pytest.raises(InvalidArgumentError, match="seed"):
        device.profile_simulated(None, SMALL, seed=-1)
    t = parse_strace(THREADS)
    for params, name in (
        ({"chunk": -1}, "chunk"),
        ({"chunk": "64K"}, "chunk"),
        ({"chunk": 2**70}, "chunk"),
        ({"chunk": 0}, "chunk"),
        ({"chunk": 3000}, "chunk"),
        ({"chunk": 65536, "hot_offset": 70000}, "hot_offset"),
        ({"bogus": 4096}, "bogus"),
        (None, "params"),
    ):
        with pytest.raises(InvalidArgumentError, match=name):
            device.check(t, params)


def test_check_refuses_empty_traces_non_profiles_and_names_strace(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(CorruptionError, match="empty"):
        device.load_io_trace(empty)
    with pytest.raises(InvalidArgumentError, match="strace"):
        device.load_io_trace(empty, "bogus")
    notprof = tmp_path / "notprof.json"
    notprof.write_text('{"a": 1}')
    tr = tmp_path / "t.strace"
    tr.write_text(THREADS)
    e = _run("device", "check", str(tr), "--params", str(notprof))
    assert e.returncode == 1 and "not a profile" in e.stderr


def test_cli_out_is_checked_before_the_profile(tmp_path):
    e = _run("device", "profile", str(tmp_path), "--out", "/nonexistent/dir/p.json")
    assert e.returncode == 1 and "--out" in e.stderr and "Traceback" not in e.stderr
    assert list(tmp_path.iterdir()) == []


# --- 5. a killed run's directory ---------------------------------------------------------------


def test_stale_directories_of_dead_runs_are_removed(tmp_path):
    dead = 2**22 + 12345  # above the default pid_max: never a running process
    stale = tmp_path / f"{real.STALE_PREFIX}{dead}@{real._host()}.abc"
    stale.mkdir()
    for name in ("1kb-seq", "512kb-seq", "512b-seq", "probe"):
        (stale / name).write_bytes(b"x")
    old = tmp_path / f"{real.STALE_PREFIX}xyz123"
    old.mkdir()
    mine = tmp_path / f"{real.STALE_PREFIX}{os.getpid()}@{real._host()}.def"
    mine.mkdir()
    r = device.profile_path(tmp_path, TINY, rounds=1)
    assert not stale.exists()
    assert old.exists() and mine.exists()
    notes = " ".join(r["notes"])
    assert "removed stale profile directory" in notes and "xyz123" in notes


def test_a_dead_runs_directory_holding_other_things_is_left_alone(tmp_path):
    dead = 2**22 + 12346
    host = real._host()
    theirs = tmp_path / f"{real.STALE_PREFIX}{dead}@{host}.a"
    theirs.mkdir()
    (theirs / "1kb-seq").write_bytes(b"x")
    (theirs / "userfile").write_text("mine")
    nested = tmp_path / f"{real.STALE_PREFIX}{dead}@{host}.b"
    (nested / "sub").mkdir(parents=True)
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "canary").write_text("keep")
    link = tmp_path / f"{real.STALE_PREFIX}{dead}@{host}.c"
    link.symlink_to(target)
    notes = " ".join(real.remove_stale(tmp_path))
    assert (theirs / "userfile").read_text() == "mine"
    assert (nested / "sub").is_dir()
    assert (target / "canary").read_text() == "keep" and link.is_symlink()
    assert "userfile" in notes and "left alone" in notes, notes
    assert "sub" in notes, notes
    assert "symbolic link" in notes, notes
    assert "removed" not in notes, notes


def test_io_simulate_refuses_an_empty_trace(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    e = _run("io", "simulate", str(empty), "--json")
    assert e.returncode == 1 and "no I/Os" in json.loads(e.stdout)["message"]


# --- errors in the user's terms ----------------------------------------------------------------


def test_file_size_errors_speak_the_cli_and_the_path_comes_first(tmp_path):
    e = _run("device", "profile", str(tmp_path / "missing"), "--file-mb", "1")
    assert e.returncode == 1 and "does not exist" in e.stderr, e.stderr
    e = _run("device", "profile", str(tmp_path), "--file-mb", "1")
    assert e.returncode == 1 and "--file-mb must be at least 4" in e.stderr, e.stderr
    assert "file_bytes" not in e.stderr
    e = _run("device", "profile", "--simulated", "--max-guess-kb", "2048", "--file-mb", "4")
    assert e.returncode == 1 and "--file-mb must be at least 8" in e.stderr, e.stderr
    with pytest.raises(InvalidArgumentError, match="file_bytes"):
        device.profile_path(tmp_path, {"file_bytes": 1 << 20})
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        device.profile_path(tmp_path / "missing", {"file_bytes": 1 << 20})
    assert list(tmp_path.iterdir()) == []


def test_too_little_space_at_the_smallest_files_says_what_can_be_done(tmp_path, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(8 << 20, 0, 8 << 20))
    for mib in (4, 8):  # not even the smallest files fit: no smaller size is advised
        with pytest.raises(InvalidArgumentError, match="even the smallest files") as e:
            device.profile_path(tmp_path, {"file_bytes": mib << 20})
        assert "smaller" not in str(e.value)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(1 << 30, 0, 60 << 20))
    with pytest.raises(InvalidArgumentError, match="use smaller files.*4 MiB is the smallest"):
        device.profile_path(tmp_path, {"file_bytes": 8 << 20})


def test_the_cli_at_the_smallest_files_on_a_small_file_system_says_to_go_elsewhere(
    tmp_path, monkeypatch, capsys
):
    usage = namedtuple("usage", "total used free")
    # 8 MiB: not even the smallest files (10 × 4 MiB) fit, so no --file-mb is advised (it was at
    # 8); 50 MiB: the smallest fit, so a smaller --file-mb is.
    for total, mib, elsewhere in [(8, "4", True), (8, "8", True), (50, "8", False)]:
        monkeypatch.setattr(shutil, "disk_usage", lambda p, t=total: usage(t << 20, 0, t << 20))
        rc, _, err = _cli(capsys, "device", "profile", str(tmp_path), "--file-mb", mib)
        assert rc == 1, err
        assert ("larger file system" in err) == elsewhere, err
        assert ("use a smaller --file-mb (4 is the smallest" in err) != elsewhere, err
    assert list(tmp_path.iterdir()) == []


def test_the_cli_preset_stripe_gives_way_to_a_geometry_it_does_not_divide(capsys):
    # The preset's 4-chip stripe does not divide one chip (or three): the documented one-chip
    # device runs instead of failing on a setting the user never gave.
    for chips in ("1", "3"):
        rc, _, err = _cli(
            capsys,
            *("device", "profile", "--simulated", "--file-mb", "16", "--samples", "8"),
            *("--set", "channels=1", "--set", f"chips_per_channel={chips}", "--no-progress"),
        )
        assert rc == 0, err
        assert "stripe_chips" not in err, err
    # A stripe the user gives is still checked against the geometry.
    rc, _, err = _cli(
        capsys,
        *("device", "profile", "--simulated", "--set", "channels=1"),
        *("--set", "chips_per_channel=1", "--set", "stripe_chips=4", "--no-progress"),
    )
    assert rc == 1 and "stripe_chips" in err, err


def test_check_reads_the_published_msr_csv_form(tmp_path, capsys):
    """The MSR-Cambridge traces as SNIA publishes them (comma-separated, 100 ns ticks) were
    refused as "expected 5 fields"; with and without the header they are read and checked."""
    body = (
        "128166372003061629,hm,1,Write,1024,4096,1307\n"
        "128166372016382155,hm,1,Write,65536,65536,51232\n"
    )
    for name, text in [
        ("hm_0.csv", body),
        ("hm_1.csv", "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n" + body),
    ]:
        tr = tmp_path / name
        tr.write_text(text)
        t = device.load_io_trace(tr)
        assert (t.offset, t.size, t.write) == ([1024, 65536], [4096, 65536], [True, True])
        rc, out, _ = _cli(capsys, "device", "check", str(tr), "--param", "stripe=65536", "--json")
        assert rc == 0, out
        doc = json.loads(out)
        assert doc["writes"] == 2 and doc["counts"]["rule3"] == 1, doc


def test_check_param_errors_and_a_guessed_format(tmp_path):
    with pytest.raises(InvalidArgumentError, match="`none` with --param"):
        device.check_params({"chunk": 0})
    with pytest.raises(InvalidArgumentError, match=r"allowed: 1\.\."):
        device.check_params({"chunk": -4096})
    device.check_params({"chunk": 4096, "hot_offset": 0})
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(CorruptionError, match="--format"):
        device.load_io_trace(junk)


def test_check_refuses_binary_params_empty_param_values_and_a_missing_trace(tmp_path):
    tr = tmp_path / "t.strace"
    tr.write_text(THREADS)
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes([0xD4, 0xFF, 0x00, 0x81]) * 64)
    e = _run("device", "check", str(tr), "--params", str(garbage))
    assert e.returncode == 1 and "Traceback" not in e.stderr, e.stderr
    assert f"{garbage} is not a profile JSON file" in e.stderr, e.stderr
    e = _run("device", "check", str(tr), "--param", "page=")
    assert e.returncode == 1 and "Traceback" not in e.stderr, e.stderr
    assert "page=: empty value" in e.stderr and "page=none" in e.stderr, e.stderr
    with pytest.raises(InvalidArgumentError, match="trace must be a TraceColumns"):
        device.check(None, {"page": 4096})


def test_api_takes_a_trace_path_and_names_bad_settings_and_findings(tmp_path):
    tr = tmp_path / "t.strace"
    tr.write_text(THREADS)
    by_path = device.check(tr, {"page": 4096})
    assert by_path.raw == device.check(device.load_io_trace(tr), {"page": 4096}).raw
    assert device.check(str(tr), {"page": 4096}).raw == by_path.raw
    with pytest.raises(InvalidArgumentError, match="file_bytes must be an integer"):
        device.profile_path(tmp_path, {"file_bytes": "4M"})
    with pytest.raises(InvalidArgumentError, match="no finding for desirable_write"):
        device.learned_params({"x": 1})
    with pytest.raises(InvalidArgumentError, match="learned must be"):
        device.learned_params(None)
    assert list(tmp_path.iterdir()) == [tr]


def test_a_min_guess_above_the_max_names_the_flags():
    e = _run("device", "profile", "--simulated", "--min-guess-kb", "1024")
    assert e.returncode == 1 and "Traceback" not in e.stderr, e.stderr
    assert "--min-guess-kb 1024 is above --max-guess-kb (512 by default)" in e.stderr, e.stderr
    assert "max_guess" not in e.stderr, e.stderr


def test_device_help_exits_0(capsys):
    from attune.cli import main

    for verb in (["device"], ["device", "check"], ["device", "profile"]):
        with pytest.raises(SystemExit) as e:
            main([*verb, "--help"])
        assert e.value.code == 0, verb
        assert "usage" in capsys.readouterr().out


def test_outside_user_rough_edges(tmp_path, capsys):
    """From a first-time user's check: --rounds with --simulated was accepted and ignored; a
    correct page the model did not expect to show was labelled FALSE POSITIVE; plot_profiles
    raised bare KeyError/FileNotFoundError; a CheckResult printed its raw arrays; "1
    violations"; a write amplification of 0.000 for a trace without writes."""
    rc, _, err = _cli(capsys, "device", "profile", "--simulated", "--rounds", "3")
    assert rc == 1 and "--rounds applies to a profile of a PATH" in err, err
    rc, out, _ = _cli(
        capsys, "device", "profile", "--simulated", "--no-progress", "--file-mb", "16",
        "--samples", "8", "--set", "page_bytes=4096", "--set", "chunk_bytes=131072",
        "--set", "channels=1", "--set", "chips_per_channel=2", "--set", "read_page_us=20",
        "--set", "channel_mb_per_s=200",
    )  # fmt: skip
    assert rc == 0 and "FALSE POSITIVE" not in out, out
    assert "the planted value, although not expected to show" in out, out
    assert "recovered exactly: yes" in out, out  # the summary counts that page too
    r = device.profile_simulated(config={"file_bytes": 16 << 20, "samples_per_group": 8})
    with pytest.raises(StorageIOError, match="cannot write the plots"):
        device.plot_profiles(r, str(tmp_path / "no-such-dir" / "p"))
    with pytest.raises(InvalidArgumentError, match="missing sizes"):
        device.plot_profiles({}, str(tmp_path / "p"))
    tr = tmp_path / "t.strace"
    tr.write_text('pread64(3</tmp/x>, "a"..., 65536, 1024) = 65536\n')
    res = device.check(tr, {"page": 4096, "chunk": 65536, "hot_offset": 32768})
    assert repr(res).startswith("CheckResult(reads=1, writes=0") and len(repr(res)) < 200
    rc, out, _ = _cli(capsys, "device", "check", str(tr), "--param", "page=4096",
                      "--param", "chunk=65536", "--param", "hot_offset=32768")  # fmt: skip
    assert rc == 0 and ": 1 violation\n" in out and "no writes, so no write amplification" in out


def test_second_outside_user_rough_edges(tmp_path, capsys, monkeypatch):
    """A gzip'd strace with --format strace was 'unknown trace format'; a --file that matched
    nothing printed '0 violations' per rule as if checked (the summary's 'recovered exactly'
    is checked in test_outside_user_rough_edges); the Python API's free-space advice told a
    2 MiB file system to use smaller files; the capacity error called 64 MiB files the smallest."""
    import gzip

    tr = tmp_path / "t.strace.gz"
    tr.write_bytes(gzip.compress(b'pwrite64(3</tmp/x>, "a"..., 24, 0) = 24\n'))
    for fmt in ("strace", None):
        t = device.load_io_trace(tr, fmt)
        assert (t.format, t.size, t.write) == ("strace", [24], [True])
    rc, out, _ = _cli(capsys, "device", "check", str(tr), "--param", "page=4096", "--file", "zz")
    assert rc == 0 and "no I/O was checked" in out, out
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(1 << 40, 0, 2 << 20))
    with pytest.raises(InvalidArgumentError, match="even the smallest files") as e:
        device.profile_path(tmp_path)
    assert "use smaller files" not in str(e.value)
    monkeypatch.undo()
    rc, _, err = _cli(capsys, "device", "profile", "--simulated", "--set", "capacity_bytes=1048576")
    assert rc == 1 and "even the smallest files these settings allow, 4 MiB each" in err, err
    with pytest.raises(InvalidArgumentError, match="str or os.PathLike, got NoneType"):
        device.profile_path(None)  # type: ignore[arg-type]
