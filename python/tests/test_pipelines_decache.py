"""DeCache: one decode shared by every loader of the same (file, dictionary columns),
reference-counted by leases that die with their process."""

from __future__ import annotations

import multiprocessing as mp
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from attune.errors import CorruptionError, InvalidArgumentError
from attune.pipelines import DAG, DeCache, table_files


@pytest.fixture
def parquet(tmp_path):
    path = tmp_path / "in.parquet"
    pq.write_table(
        pa.table({"k": np.arange(10_000), "s": [f"v{i % 50}" for i in range(10_000)]}), path
    )
    return path


def test_second_load_maps_the_first_ones_decode(tmp_path, parquet):
    cache = DeCache(tmp_path / "cache")
    s1, s2 = {}, {}
    a = cache.load(parquet, ["s"], stats=s1)
    b = cache.load(parquet, ["s"], stats=s2)
    assert (s1["decache"], s2["decache"]) == ("load", "hit")
    assert a.equals(b) and a.equals(pq.read_table(parquet, read_dictionary=["s"]))
    assert pa.types.is_dictionary(a["s"].type)
    assert a["k"].chunk(0).buffers()[1].address == b["k"].chunk(0).buffers()[1].address


def test_other_dictionary_columns_or_a_rewritten_file_are_other_entries(tmp_path, parquet):
    cache = DeCache(tmp_path / "cache")
    assert cache.key(parquet, ["s"]) != cache.key(parquet, [])
    k = cache.key(parquet)
    pq.write_table(pa.table({"k": [1]}), parquet)
    os.utime(parquet, ns=(1, 1))
    assert cache.key(parquet) != k
    with pytest.raises(InvalidArgumentError, match="no such file"):
        cache.key(tmp_path / "missing.parquet")


def test_leases_count_and_dead_holders_do_not(tmp_path, parquet):
    cache = DeCache(tmp_path / "cache")
    key = cache.key(parquet)
    cache.load(parquet)
    with cache.lease(key):
        assert cache.refcount(key) == 1
        assert cache.evict() == 0  # referenced: kept
    assert cache.refcount(key) == 0
    # A holder that died without releasing does not pin the entry.
    p = mp.get_context("fork").Process(target=lambda: cache.lease(key))
    p.start()
    p.join()
    assert cache.refcount(key) == 0
    assert cache.evict() > 0
    assert cache.entries() == []


def test_dags_share_one_decode_and_their_loader_copies_nothing(tmp_path, parquet):
    cache = DeCache(tmp_path / "cache")

    def dag():
        d = DAG()
        src = d.load_parquet(parquet, dictionary_columns=["s"], cache=cache)
        d.node(lambda t: t.filter(pc.less(t["k"], 100)), src, name="f")
        return d

    first = dag().run(root=str(tmp_path))
    # The entry refers only to its own files (never to the first run's, which are gone).
    (entry,) = cache.entries()
    files = table_files(os.path.join(cache.root, entry["key"], "table.sipc"))
    assert {os.path.dirname(f) for f in files} == {os.path.join(cache.root, entry["key"])}
    second = dag().run(root=str(tmp_path))
    assert first.nodes["load"]["bytes_copied"] == 0  # the output refers to the cache
    assert second.nodes["load"]["bytes_copied"] == 0
    assert second["f"].equals(dag().run_inline()["f"])
    assert [e["refs"] for e in cache.entries()] == [0]  # the runs released their leases


def test_disabled_cache_decodes_every_time(tmp_path, parquet):
    cache = DeCache(tmp_path / "cache", enabled=False)
    st = {}
    assert cache.load(parquet, stats=st).equals(pq.read_table(parquet))
    assert st["decache"] == "off" and cache.entries() == []


def test_column_parallel_decode_equals_pyarrows(tmp_path):
    from attune.pipelines.decache import read_parquet

    path = tmp_path / "wide.parquet"
    t = pa.table(
        {
            "k": np.arange(5_000),
            "s": [f"v{i % 7}" for i in range(5_000)],
            "l": [[i, i + 1] for i in range(5_000)],
            "st": [{"a": i, "b": str(i)} for i in range(5_000)],
        }
    )
    pq.write_table(t, path, row_group_size=1_000)
    for cols in ((), ("s",)):
        want = pq.read_table(path, read_dictionary=list(cols) or None)
        for threads in (1, 3):
            got = read_parquet(path, cols, threads)
            assert got.equals(want) and got.schema.equals(want.schema, check_metadata=True)


def _entry_dir(cache: DeCache) -> str:
    (entry,) = cache.entries()
    return os.path.join(cache.root, entry["key"])


def test_a_miss_decodes_straight_into_the_entrys_files(tmp_path):
    from attune.pipelines import shmpool

    if not shmpool.available()[0]:
        pytest.skip(f"no shared memory pool here: {shmpool.available()[1]}")
    path = tmp_path / "wide.parquet"
    n = 20_000
    t = pa.table(
        {
            "k": np.arange(n),
            "s": [f"v{i % 7}" for i in range(n)],
            "l": [[i, i + 1] for i in range(n)],
            "st": [{"a": i, "b": str(i)} for i in range(n)],
        }
    )
    pq.write_table(t, path, row_group_size=3_000)
    for threads in (1, 3):
        cache = DeCache(tmp_path / f"cache{threads}", threads=threads)
        st: dict = {}
        got = cache.load(path, ["s"], stats=st)
        assert st == {"decache": "load", "decache_fill": "direct"}
        want = pq.read_table(path, read_dictionary=["s"])
        assert got.equals(want) and got.schema.equals(want.schema, check_metadata=True)
        entry = _entry_dir(cache)
        names = os.listdir(entry)
        # The table refers to the decode's segments (nothing copied into column files).
        files = table_files(os.path.join(entry, "table.sipc"))
        assert files and all(os.path.basename(f).startswith("seg-") for f in files)
        assert {os.path.dirname(f) for f in files} == {entry}
        assert sorted(n for n in names if n.startswith("seg-")) == sorted(
            os.path.basename(f) for f in files
        )
        assert not any(n.startswith("t-") for n in names)  # no column or dictionary files
        # Pages the table does not use were returned: the entry is about the table's size.
        occupied = sum(os.stat(os.path.join(entry, n)).st_blocks * 512 for n in names)
        assert occupied < 2 * want.nbytes + (1 << 20)
        # A later loader maps the same files and gets the same table.
        st2: dict = {}
        again = DeCache(cache.root).load(path, ["s"], stats=st2)
        assert st2["decache"] == "hit" and again.equals(want)


def test_direct_off_copies_the_decoded_table_in(tmp_path, parquet):
    cache = DeCache(tmp_path / "cache", direct=False)
    st: dict = {}
    got = cache.load(parquet, ["s"], stats=st)
    assert st["decache_fill"] == "copy"
    assert got.equals(pq.read_table(parquet, read_dictionary=["s"]))
    assert not any(n.startswith("seg-") for n in os.listdir(_entry_dir(cache)))


def test_an_entry_filled_again_is_not_confused_with_the_old_ones_files(tmp_path, parquet):
    # A table of the first fill stays mapped while the entry is cleared and filled from
    # another file version: the new table must be read from the new files.
    cache = DeCache(tmp_path / "cache")
    old = cache.load(parquet)
    cache.clear()
    cache.root = str(tmp_path / "cache")
    assert cache.load(parquet).equals(old)  # same key, new files
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"k": np.arange(10_000) * 3, "s": ["x"] * 10_000}), other)
    os.replace(other, parquet)
    os.utime(parquet, ns=(5, 5))
    new = cache.load(parquet)
    assert new.equals(pq.read_table(parquet)) and old["k"][1].as_py() == 1


def test_a_failed_decode_leaves_no_entry(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1" + b"\0" * 100 + b"PAR1")
    cache = DeCache(tmp_path / "cache")
    with pytest.raises(CorruptionError, match="bad.parquet"):
        cache.load(bad)
    assert cache.entries() == []


def test_a_child_forked_while_a_lock_is_held_does_not_keep_it(tmp_path):
    # A DAG run on another thread may fork a node process while this thread holds an entry's
    # lock; the child must not keep the lock alive after the holder lets go.
    import fcntl

    cache = DeCache(str(tmp_path / "cache"))
    gate_r, gate_w = os.pipe()
    ready_r, ready_w = os.pipe()
    with cache._locked("k"):
        pid = os.fork()
        if pid == 0:  # the child: waits until the parent has checked, holding what it inherited
            os.write(ready_w, b"r")  # os.fork() returned here: the at-fork hooks have run
            os.read(gate_r, 1)
            os._exit(0)
    assert os.read(ready_r, 1) == b"r"
    os.close(ready_r)
    os.close(ready_w)
    fd = os.open(str(tmp_path / "cache" / "k.lock"), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if the child still held it
    finally:
        os.close(fd)
        os.write(gate_w, b"x")
        os.waitpid(pid, 0)
        os.close(gate_r)
        os.close(gate_w)
