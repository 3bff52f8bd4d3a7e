"""Cross-check attune-cache's LRU and S3-FIFO against libCacheSim on the same block trace.

The trace is seeded (a skewed draw plus sequential scans); `attune-bench cache-sim --mode replay`
replays it through attune-cache and libCacheSim's Python binding replays it through its own LRU
and S3FIFO, every object 4 KiB. LRU must agree exactly. S3-FIFO implementations differ in details
the paper leaves open (ghost length, when a small-queue object moves to main), so the two are
configured alike (promotion after one hit) and must agree within 0.005 absolute miss ratio
(measured: under 0.001).
Skipped when libCacheSim or the simulator binary is not available.
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest

lcs = pytest.importorskip("libcachesim")

BLOCK = 4096
SIZES = [64, 256, 1024]
SEED = 20241


def simulator() -> list[str] | None:
    """`attune-bench cache-sim` (the harness binary), or None when it is not built."""
    from attune.bench import BenchError, find_binary

    try:
        return [str(find_binary()), "cache-sim"]
    except BenchError:
        return None


def make_trace(n: int, blocks: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    out: list[int] = []
    while len(out) < n:
        if rng.random() < 0.01:
            start = rng.randrange(blocks)
            out.extend((start + j) % blocks for j in range(rng.randint(16, 256)))
        else:
            out.append(int(blocks * rng.random() ** 3))
    return out[:n]


def libcachesim_misses(kind: str, cache_blocks: int, trace: list[int]) -> int:
    size = cache_blocks * BLOCK
    if kind == "lru":
        cache = lcs.LRU(cache_size=size)
    else:
        cache = lcs.S3FIFO(cache_size=size, move_to_main_threshold=1)
    misses = 0
    req = lcs.Request()
    for obj in trace:
        req.obj_id = obj
        req.obj_size = BLOCK
        if not cache.get(req):
            misses += 1
    return misses


def test_lru_and_s3fifo_agree_with_libcachesim(tmp_path: Path) -> None:
    sim = simulator()
    if sim is None:
        pytest.skip("attune-bench not built (cargo build --release -p attune-bench)")
    print(f"seed {SEED}")
    trace = make_trace(200_000, 8192, SEED)
    path = tmp_path / "trace.txt"
    path.write_text("\n".join(map(str, trace)) + "\n", encoding="utf-8")
    sizes = ",".join(map(str, SIZES))
    run = subprocess.run(
        [*sim, "--mode", "replay", "--trace", str(path), "--cache-blocks", sizes, "--json"],
        check=True,
        capture_output=True,
        text=True,
    )
    ours = {
        (r["policy"], r["cache_blocks"]): r["misses"]
        for r in map(json.loads, run.stdout.splitlines())
    }
    for size in SIZES:
        theirs = libcachesim_misses("lru", size, trace)
        print(f"lru {size}: attune {ours[('lru', size)]} libcachesim {theirs}")
        assert ours[("lru", size)] == theirs
        theirs = libcachesim_misses("s3fifo", size, trace)
        mine = ours[("s3fifo", size)]
        print(f"s3fifo {size}: attune {mine} libcachesim {theirs}")
        assert abs(mine - theirs) / len(trace) <= 0.005


def test_replay_rejects_a_bad_trace(tmp_path: Path) -> None:
    sim = simulator()
    if sim is None:
        pytest.skip("attune-bench not built")
    path = tmp_path / "bad.txt"
    path.write_text("1\nnot-a-number\n", encoding="utf-8")
    run = subprocess.run(
        [*sim, "--mode", "replay", "--trace", str(path)],
        check=False,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2
    assert "not a block id" in run.stderr
