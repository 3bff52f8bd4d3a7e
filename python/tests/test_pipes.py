"""attune.pipes and `attune pipes`: transfers with futures, the external sort, clean errors, and
no partial output under the final name."""

from __future__ import annotations

import concurrent.futures
import json
import os
import selectors

import pytest

import attune
from attune import pipes
from attune.cli import main


def _data(n: int, seed: int = 1) -> bytes:
    return bytes((i * 31 + seed + (i >> 12)) & 0xFF for i in range(n))


@pytest.mark.parametrize("mechanism", ["io_uring", "threads", "mmap"])
def test_a_transfer_future_moves_the_file_into_memory(tmp_path, mechanism):
    path = tmp_path / "in"
    path.write_bytes(_data(1 << 18))
    rt = pipes.Runtime(mechanism=mechanism)
    assert rt.report()["mechanism"] == mechanism
    src = pipes.Locator.file(path)
    mem = pipes.Locator.dram(1 << 18)
    pipe = rt.pipe(src, mem, block_bytes=1 << 16)
    fut = pipes.transfer(pipe, 0, 0, 1 << 18)
    assert isinstance(fut, concurrent.futures.Future)
    assert fut.result(timeout=60) == 1 << 18
    assert mem.read(0, 1 << 18) == path.read_bytes()
    state = pipe.state()
    assert state["mechanism"] == mechanism
    assert state["bytes_moved"] == 1 << 18 and state["requests_in_flight"] == 0


@pytest.mark.parametrize("huge_pages", [True, False])
def test_dram_on_huge_or_small_pages_moves_the_same_bytes(tmp_path, huge_pages):
    n = 4 << 20
    path = tmp_path / "in"
    path.write_bytes(_data(n, 5))
    mem = pipes.Locator.dram(n, huge_pages=huge_pages)
    thp = os.path.exists("/sys/kernel/mm/transparent_hugepage")
    assert mem.huge_pages == (huge_pages and thp)
    assert not pipes.Locator.dram(1 << 20).huge_pages  # under 2 MiB: small pages
    pipe = pipes.Runtime().pipe(pipes.Locator.file(path), mem, block_bytes=1 << 20)
    assert pipe.transfer_blocking(0, 0, n) == n
    assert mem.read(0, n) == path.read_bytes()


def test_blocking_writes_and_the_ready_fd(tmp_path):
    rt = pipes.Runtime()
    mem = pipes.Locator.dram(4096)
    mem.write(0, b"hello pipes")
    out = pipes.Locator.file(tmp_path / "out", create=True)
    pipe = rt.pipe(mem, out)
    assert pipe.transfer_blocking(0, 0, 11) == 11
    assert (tmp_path / "out").read_bytes() == b"hello pipes"
    with selectors.DefaultSelector() as sel:
        sel.register(pipe.fileno(), selectors.EVENT_READ)
        assert sel.select(timeout=10), "the eventfd is readable after a transfer ended"


def test_pmem_and_core_cache_locators(tmp_path):
    rt = pipes.Runtime()
    pm = pipes.Locator.pmem(tmp_path / "pmem", 8192)
    cc = pipes.Locator.core_cache(0, 8192)
    assert (pm.kind, cc.kind) == ("pmem", "core_cache")
    pm.write(0, b"x" * 8192)
    pipe = rt.pipe(pm, cc)
    assert pipe.state()["mechanism"] == "memcpy"
    pipe.transfer_blocking(0, 0, 8192)
    assert cc.read(0, 8192) == b"x" * 8192


def test_errors_name_what_is_wrong(tmp_path):
    rt = pipes.Runtime()
    with pytest.raises(attune.InvalidArgumentError, match="missing"):
        pipes.Locator.file(tmp_path / "missing")
    short = tmp_path / "short"
    short.write_bytes(b"x" * 1000)
    pipe = rt.pipe(pipes.Locator.file(short), pipes.Locator.dram(8192))
    with pytest.raises(attune.StorageIOError, match="short file") as exc:
        pipe.transfer(0, 0, 4096)
    assert exc.value.path == str(short)
    with pytest.raises(attune.InvalidArgumentError, match="compose"):
        rt.pipe(pipes.Locator.file(short), pipes.Locator.file(short))
    with pytest.raises(attune.InvalidArgumentError, match="unknown mechanism"):
        pipes.Runtime(mechanism="dma")
    full = pipes.Locator.file("/dev/full", write=True)
    with pytest.raises(attune.StorageIOError, match="no space"):
        rt.pipe(pipes.Locator.dram(4096), full).transfer_blocking(0, 0, 4096)


def test_negative_and_oversized_ints_name_the_argument(tmp_path):
    """Every int argument out of its range raises InvalidArgumentError naming it (PyO3's own
    conversion raised a bare OverflowError), a non-int still a TypeError naming it, and an
    infinite timeout waits rather than panicking."""
    data = tmp_path / "data"
    data.write_bytes(_data(8192))
    rt = pipes.Runtime()
    src, mem = pipes.Locator.file(data), pipes.Locator.dram(8192)
    pipe = rt.pipe(src, mem)
    calls = {
        "queue_depth": lambda: pipes.Runtime(queue_depth=-1),
        "block_bytes": lambda: pipes.Runtime(block_bytes=-4096),
        "sqpoll_idle_ms": lambda: pipes.Runtime(sqpoll_idle_ms=-5),
        "submit_batch": lambda: pipes.Runtime(submit_batch=1 << 40),
        "nbytes": lambda: pipes.Locator.dram(-1),
        "core": lambda: pipes.Locator.core_cache(-1),
        "offset": lambda: mem.read(-1, 4),
        "length": lambda: mem.read(0, -4),
        "src_offset": lambda: pipe.transfer(-4096, 0, 4096),
        "dst_offset": lambda: pipe.transfer_blocking(0, -1, 4096),
        "fan_in": lambda: pipes.sort(data, tmp_path / "out", fan_in=-2),
        "memory_bytes": lambda: pipes.sort(data, tmp_path / "out", memory_bytes=-1),
        "records": lambda: pipes.generate_records(tmp_path / "g", -10),
        "max_bytes": lambda: pipes.generate_lines(tmp_path / "g", 10, max_bytes=-1),
    }
    for name, call in calls.items():
        with pytest.raises(attune.InvalidArgumentError, match=rf"\b{name}=-?\d+ is "):
            call()
    with pytest.raises(TypeError, match="queue_depth"):
        pipes.Runtime(queue_depth="deep")  # type: ignore[arg-type]
    assert not (tmp_path / "out").exists()
    t = pipe.transfer(0, 0, 8192)
    assert t.wait(float("inf")) == 8192
    assert t.wait(float("nan")) == 8192
    assert mem.read(0, 8192) == _data(8192)


def test_sort_orders_records_and_reports(tmp_path):
    src = tmp_path / "in"
    pipes.generate_records(src, 30_000, seed=3)
    out = tmp_path / "out"
    phases = []
    report = pipes.sort(
        src,
        out,
        memory_bytes=2 << 20,
        run_bytes=100_000,
        progress=lambda phase, done, total: phases.append(phase),
    )
    data = out.read_bytes()
    recs = [data[i : i + 100] for i in range(0, len(data), 100)]
    assert len(recs) == 30_000
    assert [r[:10] for r in recs] == sorted(r[:10] for r in recs)
    assert sorted(recs) == sorted(src.read_bytes()[i : i + 100] for i in range(0, 3_000_000, 100))
    assert report["records"] == 30_000 and report["merge_passes"] >= 1
    assert phases[0] == "runs" and any(p.startswith("merge") for p in phases)


def test_every_merge_select_writes_the_same_output(tmp_path):
    src = tmp_path / "in"
    pipes.generate_records(src, 20_000, seed=5)
    outs = []
    for select in ("loser-tree", "heap", "scan"):
        out = tmp_path / f"out-{select}"
        report = pipes.sort(src, out, memory_bytes=2 << 20, run_bytes=50_000, merge_select=select)
        assert report["merge_select"] == select
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2]
    with pytest.raises(attune.InvalidArgumentError, match="merge_select"):
        pipes.sort(src, tmp_path / "bad", merge_select="bubble")
    assert (
        main(
            [
                "pipes",
                "sort",
                str(src),
                str(tmp_path / "cli"),
                "--merge-select",
                "heap",
                "--merge-fan-in",
                "3",
                "--memory",
                "2MiB",
                "--json",
            ]
        )
        == 0
    )
    assert (tmp_path / "cli").read_bytes() == outs[0]


def test_direct_and_buffered_io_write_the_same_output(tmp_path):
    src = tmp_path / "in"
    pipes.generate_records(src, 20_001, seed=6)  # not whole 4 KiB pages: the tail is read apart
    direct = pipes.sort(src, tmp_path / "direct", memory_bytes=2 << 20, run_bytes=50_000)
    buffered = pipes.sort(
        src, tmp_path / "buffered", memory_bytes=2 << 20, run_bytes=50_000, direct_io=False
    )
    assert buffered["direct_io"] is False and isinstance(direct["direct_io"], bool)
    assert (tmp_path / "direct").read_bytes() == (tmp_path / "buffered").read_bytes()
    assert (tmp_path / "direct").stat().st_size == 20_001 * 100
    assert main(["pipes", "sort", str(src), str(tmp_path / "cli"), "--no-direct-io", "--json"]) == 0
    assert (tmp_path / "cli").read_bytes() == (tmp_path / "direct").read_bytes()


def test_an_interrupted_sort_leaves_no_output(tmp_path):
    src = tmp_path / "in"
    pipes.generate_records(src, 20_000)
    out = tmp_path / "out"

    def stop(phase, done, total):
        if phase.startswith("merge"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pipes.sort(src, out, memory_bytes=2 << 20, run_bytes=100_000, progress=stop)
    assert not out.exists()
    assert [p for p in os.listdir(tmp_path) if p.startswith(".")] == []


def test_cli_gen_sort_and_info(tmp_path, capsys):
    src, out = tmp_path / "in", tmp_path / "out"
    assert main(["pipes", "gen", str(src), "--records", "5000", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bytes"] == 500_000
    assert main(["pipes", "sort", str(src), str(out), "--memory", "2MiB", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["records"] == 5000 and out.stat().st_size == 500_000
    assert main(["pipes", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["mechanism"] in ("io_uring", "threads", "mmap")


def test_cli_errors_are_clean(tmp_path, capsys):
    bad = tmp_path / "bad"
    bad.write_bytes(b"x" * 150)
    assert main(["pipes", "sort", str(bad), str(tmp_path / "out"), "--json"]) == 1
    err = json.loads(capsys.readouterr().out)
    assert err["error"] == "InvalidArgumentError" and "150 bytes" in err["message"]
    assert not (tmp_path / "out").exists()


def test_cli_bench_sort_forwards_to_the_harness(tmp_path, capfd):
    argv = ["pipes", "bench", "sort", "--records", "3000", "--memory", "4MiB"]
    argv += ["--engines", "pipes,plain", "--dir", str(tmp_path), "--json"]
    assert main(argv) == 0
    rows = [json.loads(line) for line in capfd.readouterr().out.splitlines()]
    assert [r["engine"] for r in rows] == ["pipes", "plain"]
    assert all(r["checked"] and r["records"] == 3000 for r in rows)


def _random_lines(seed: int, count: int) -> bytes:
    """Lines of 0-300 bytes (any byte but newline), with empty lines, duplicates, long lines."""
    import random

    rng = random.Random(seed)
    lines: list[bytes] = []
    for _ in range(count):
        roll = rng.random()
        if roll < 0.1 and lines:
            lines.append(rng.choice(lines))
        elif roll < 0.25:
            lines.append(b"")
        elif roll < 0.995:
            n = rng.randrange(300)
            lines.append(bytes(rng.choice(b"ab\x00\xff\t\r z") for _ in range(n)))
        else:
            lines.append(bytes(rng.randrange(11, 256) for _ in range(rng.randrange(20_000))))
    return b"".join(line + b"\n" for line in lines)


def test_sort_of_lines_equals_sorted_of_the_lines(tmp_path):
    src, out = tmp_path / "in", tmp_path / "out"
    data = _random_lines(11, 40_000)
    src.write_bytes(data)
    report = pipes.sort(
        src, out, memory_bytes=2 << 20, block_bytes=102_400, run_bytes=20_000,
        record_format="lines",
    )  # fmt: skip
    assert out.read_bytes() == b"".join(line + b"\n" for line in sorted(data.split(b"\n")[:-1]))
    assert report["format"] == "lines" and report["records"] == 40_000
    assert report["spilled_runs"] > 1 and report["merge_passes"] >= 1


def test_sort_of_lines_matches_gnu_sort_in_the_c_locale(tmp_path):
    import shutil
    import subprocess

    if shutil.which("sort") is None:
        pytest.skip("no GNU sort here")
    src = tmp_path / "in"
    n = pipes.generate_lines(src, 30_000, min_bytes=0, max_bytes=120, seed=4)
    # An unterminated last line: both sorts add its newline.
    with open(src, "ab") as f:
        f.write(b"unterminated")
    pipes.sort(src, tmp_path / "out", memory_bytes=2 << 20, record_format="lines")
    gnu = subprocess.run(
        ["sort", str(src)], env={**os.environ, "LC_ALL": "C"}, capture_output=True, check=True
    ).stdout
    assert (tmp_path / "out").read_bytes() == gnu
    assert len(gnu) == n + len(b"unterminated\n")


def test_sort_of_lines_edges_and_errors(tmp_path):
    src, out = tmp_path / "in", tmp_path / "out"
    src.write_bytes(b"")
    assert pipes.sort(src, out, record_format="lines")["records"] == 0
    assert out.read_bytes() == b""
    out.write_bytes(b"previous")
    src.write_bytes(b"a\n" + b"x" * 200_000 + b"\nb\n")
    with pytest.raises(attune.InvalidArgumentError, match="at byte 2 .*block_bytes"):
        pipes.sort(src, out, memory_bytes=2 << 20, block_bytes=102_400, record_format="lines")
    with pytest.raises(attune.InvalidArgumentError, match="fixed or lines"):
        pipes.sort(src, out, record_format="csv")
    assert out.read_bytes() == b"previous"
    assert [p for p in os.listdir(tmp_path) if p.startswith(".")] == []


def test_an_interrupted_sort_of_lines_leaves_no_output(tmp_path):
    src, out = tmp_path / "in", tmp_path / "out"
    pipes.generate_lines(src, 60_000)

    def stop(phase, done, total):
        if phase.startswith("merge"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pipes.sort(src, out, memory_bytes=2 << 20, record_format="lines", progress=stop)
    assert not out.exists()
    assert [p for p in os.listdir(tmp_path) if p.startswith(".")] == []


def test_cli_gen_and_sort_lines(tmp_path, capsys):
    src, out = tmp_path / "in", tmp_path / "out"
    assert main(["pipes", "gen", str(src), "--lines", "5000", "--line-bytes", "3-9", "--json"]) == 0
    n = json.loads(capsys.readouterr().out)["bytes"]
    assert 5000 * 4 <= n <= 5000 * 10
    assert main(["pipes", "sort", str(src), str(out), "--lines", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["records"] == 5000
    lines = out.read_bytes().split(b"\n")[:-1]
    assert lines == sorted(src.read_bytes().split(b"\n")[:-1])
    assert main(["pipes", "gen", str(src), "--json"]) == 1
    assert "--records N or --lines N" in json.loads(capsys.readouterr().out)["message"]


def test_cli_bench_sort_of_lines(tmp_path, capfd):
    argv = ["pipes", "bench", "sort", "--lines", "4000", "--memory", "4MiB"]
    argv += ["--engines", "pipes,plain,gnu-sort", "--dir", str(tmp_path), "--json"]
    assert main(argv) == 0
    rows = [json.loads(line) for line in capfd.readouterr().out.splitlines()]
    assert [r["engine"] for r in rows] == ["pipes", "plain", "gnu-sort"]
    assert all(r["checked"] and r["format"] == "lines" and r["records"] == 4000 for r in rows)
