"""Recycling dropped tables' files: a later segment takes a dropped table's file with its pages,
never while a reader still maps it, bounded, and nothing is left behind."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from attune.errors import InvalidArgumentError
from attune.pipelines import DAG, DeCache, NodeFailedError, recycle, shmpool

pytestmark = pytest.mark.skipif(not shmpool.available()[0], reason="no shared memory pool")

ROWS = 1_000_000  # 8 MB per int64 column: large blocks, files above recycle.FILE_BYTES_MIN


def src() -> pa.Table:
    return pa.table({"a": pc.add(pa.array(np.arange(ROWS, dtype=np.int64)), 1)})


def mid(t: pa.Table) -> pa.Table:
    return pa.table({"b": pc.multiply(t["a"], 3)})


def total(t: pa.Table) -> pa.Table:
    return pa.table({"s": [pc.sum(t["b"]).as_py()]})


def chain() -> DAG:
    dag = DAG("chain")
    dag.node(total, dag.node(mid, dag.node(src)))
    return dag


def run_dirs(root) -> list[str]:
    return [
        d for d in os.listdir(root) if d.startswith("attune-dag.") and not d.endswith(".recycle")
    ]


def inodes(d: str) -> set[int]:
    return {os.stat(os.path.join(d, n)).st_ino for n in os.listdir(d)}


@pytest.fixture(autouse=True)
def _release():
    yield
    recycle.release()


@pytest.mark.parametrize("processes", ["run", "node"])
def test_a_dropped_tables_files_become_the_next_runs_segments(tmp_path, processes):
    dag = chain()
    want = dag.run_inline()["total"]
    first = dag.run(root=str(tmp_path), processes=processes)
    assert first["total"].equals(want)
    bin_ = recycle.directory(str(tmp_path))
    kept = inodes(bin_)
    assert kept  # src's and mid's files, dropped when their consumers finished
    assert recycle.held_bytes(bin_) <= recycle.BYTES_MAX

    seen: dict[str, set[int]] = {}

    def segments_of(name: str, stats: dict) -> None:
        (run,) = run_dirs(tmp_path)
        d = tmp_path / run
        seen[name] = {os.stat(d / f).st_ino for f in os.listdir(d) if f.startswith(f"{name}.")}

    second = dag.run(root=str(tmp_path), processes=processes, on_node_done=segments_of)
    assert second["total"].equals(want)
    assert second.nodes["src"]["recycled_segments"] >= 1
    assert second.nodes["src"]["recycled_bytes"] >= 4 << 20
    # No fresh file: src's segment is a file the first run dropped, renamed.
    assert seen["src"] & kept
    assert run_dirs(tmp_path) == []


def test_a_recycled_file_still_mapped_by_a_reader_is_never_reused(tmp_path):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    name = f"{shmpool.SEGMENT_BYTES}.1.0"
    with open(bin_ / name, "wb") as f:
        f.write(b"\xab" * (2 << 20))
        f.truncate(shmpool.SEGMENT_BYTES)
    reader = pa.memory_map(str(bin_ / name))  # a table someone still maps
    seen = reader.read_buffer(2 << 20)
    before = shmpool.recycled()
    pool = shmpool.DetachedPool(str(tmp_path), "seg", recycle_dir=str(bin_))
    out = pc.add(pa.array(np.arange(100_000, dtype=np.int64)), 1, memory_pool=pool.pool)
    assert out.to_numpy()[-1] == 100_000
    assert shmpool.recycled() == before  # refused: a fresh segment instead
    assert os.listdir(bin_) == [name]  # back under its name, for a later try
    assert seen.to_pybytes() == b"\xab" * (2 << 20)  # the reader's bytes never changed
    del out
    pool.close()

    del seen
    reader.close()  # nobody maps it any more: the next segment takes it
    pool = shmpool.DetachedPool(str(tmp_path), "seg2", recycle_dir=str(bin_))
    out = pc.add(pa.array(np.arange(100_000, dtype=np.int64)), 1, memory_pool=pool.pool)
    assert out.to_numpy()[-1] == 100_000
    assert shmpool.recycled()[0] == before[0] + 1
    assert shmpool.recycled()[1] >= before[1] + (2 << 20)  # its pages came with it
    assert os.listdir(bin_) == []
    del out
    pool.close()


def test_a_cleared_decache_entry_feeds_the_next_decode(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": np.arange(ROWS, dtype=np.int64), "b": np.ones(ROWS)}), path)
    cache = DeCache(str(tmp_path / "cache"))
    dag = DAG("load")
    dag.node(lambda t: t.slice(0, 3), dag.load_parquet(path, cache=cache), name="head")
    first = dag.run(root=str(tmp_path))
    assert first.nodes["load"].get("recycled_segments", 0) == 0
    cache.clear()  # the entry's segments go to the recycle directory (no run maps them)
    second = dag.run(root=str(tmp_path))
    assert second["head"].equals(first["head"])
    assert second.nodes["load"]["recycled_segments"] >= 1


def test_recycling_is_bounded_and_can_be_switched_off(tmp_path):
    dag = chain()
    dag.run(root=str(tmp_path), recycle_bytes_max=0)
    assert not os.path.exists(recycle.directory(str(tmp_path)))
    cap = 20 << 20
    dag.run(root=str(tmp_path), recycle_bytes_max=cap)
    held = recycle.held_bytes(recycle.directory(str(tmp_path)))
    assert 0 < held <= cap
    for bad in (-1, 1.5, "1", True):
        with pytest.raises(InvalidArgumentError, match="recycle_bytes_max must be"):
            dag.run(root=str(tmp_path), recycle_bytes_max=bad)


def boom(t: pa.Table) -> pa.Table:
    raise ValueError("no")


def test_a_failed_run_leaves_no_recycled_files(tmp_path):
    chain().run(root=str(tmp_path))
    assert os.listdir(recycle.directory(str(tmp_path)))
    dag = DAG("fails")
    dag.node(boom, dag.node(mid, dag.node(src)))
    with pytest.raises(NodeFailedError):
        dag.run(root=str(tmp_path))
    assert [d for d in os.listdir(tmp_path) if d.startswith("attune-dag.")] == []


def test_release_removes_the_directory(tmp_path):
    chain().run(root=str(tmp_path))
    assert os.path.isdir(recycle.directory(str(tmp_path)))
    recycle.release()
    assert [d for d in os.listdir(tmp_path) if d.startswith("attune-dag.")] == []


def test_returned_tables_are_recycled_only_once_the_caller_lets_them_go(tmp_path):
    dag = DAG("returns")
    dag.node(mid, dag.node(src))  # the sink's 8 MB column is returned
    want = dag.run_inline()["mid"]
    held = dag.run(root=str(tmp_path))
    bin_ = recycle.directory(str(tmp_path))
    returned = {os.stat(os.path.join(bin_, n)).st_ino for n in os.listdir(bin_)}
    for _ in range(2):  # later runs must not write into the files the caller still maps
        again = dag.run(root=str(tmp_path))
        assert again["mid"].equals(want)
        del again
    assert held["mid"].equals(want)
    assert returned & inodes(bin_)
    del held  # now they can serve new segments
    nxt = dag.run(root=str(tmp_path))
    assert nxt["mid"].equals(want)
    assert nxt.nodes["src"]["recycled_segments"] >= 1
