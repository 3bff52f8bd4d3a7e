"""DAG runs: identical to one process, under fork and spawn; every failure is a clear error and
leaves no shared file behind."""

from __future__ import annotations

import os
import signal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from attune.pipelines import DAG, NodeFailedError, PipelineError
from attune.pipelines.dag import TRANSPORTS


def load() -> pa.Table:
    rng = np.random.default_rng(7)
    return pa.table(
        {
            "a": pa.array(rng.integers(0, 1000, 50_000)),
            "b": pa.array(rng.random(50_000)),
            "s": pa.array(rng.choice(["x", "yy", "zzz", "ß"], 50_000)).dictionary_encode(),
        }
    )


def add_col(t: pa.Table) -> pa.Table:
    return t.append_column("c", pc.multiply(t["a"], t["b"]))


def keep_small(t: pa.Table) -> pa.Table:
    return t.filter(pc.less(t["a"], 500))


def sort_by_b(t: pa.Table) -> pa.Table:
    return t.sort_by("b")


def join(x: pa.Table, y: pa.Table) -> pa.Table:
    return pa.concat_tables([x.select(["a", "b", "s"]), y.select(["a", "b", "s"])])


def build(dag: DAG):
    src = dag.node(load)
    c = dag.node(add_col, src)
    f = dag.node(keep_small, c)
    s = dag.node(sort_by_b, src)
    j = dag.node(join, f, s)
    return src, c, f, s, j


def no_run_directories(root) -> bool:
    return not [
        d
        for d in os.listdir(root)
        if d.startswith("attune-dag.") and ".pool." not in d and not d.endswith(".recycle")
    ]


def test_results_equal_one_process(tmp_path):
    dag = DAG()
    *_, j = build(dag)
    f = dag.nodes[2]
    got = dag.run(outputs=[f, j], root=str(tmp_path))
    want = dag.run_inline(outputs=[f, j])
    assert set(got.tables) == {"keep_small", "join"}
    for name in want:
        assert got[name].equals(want[name])
    assert no_run_directories(tmp_path)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_every_transport_gives_the_same_tables(tmp_path, transport):
    dag = DAG()
    build(dag)
    got = dag.run(transport=transport, root=str(tmp_path))
    assert got["join"].equals(dag.run_inline()["join"])


def test_pass_through_nodes_copy_nothing(tmp_path):
    dag = DAG()
    src = dag.node(load)
    a = dag.node(lambda t: t.slice(10, 20_000), src, name="slice")
    b = dag.node(lambda t: t.drop_columns(["b"]), a, name="drop")
    res = dag.run(outputs=[b], root=str(tmp_path))
    assert res.nodes["slice"]["bytes_copied"] == 0
    assert res.nodes["drop"]["bytes_copied"] == 0
    assert res.nodes["drop"]["bytes_reshared"] > 0


def test_intermediate_tables_are_removed_when_their_consumers_finish(tmp_path):
    dag = DAG()
    src = dag.node(load)
    mid = dag.node(lambda t: t.append_column("z", pc.add(t["a"], 1)), src, name="mid")
    dag.node(lambda t: t.select(["z"]), mid, name="last")
    seen = []
    dag.run(
        root=str(tmp_path),
        keep_directory=True,
        memory_pool="default",  # the new column is then copied into mid.c3
        on_node_done=lambda name, stats: seen.append(name),
    )
    (run,) = [
        d
        for d in os.listdir(tmp_path)
        if d.startswith("attune-dag.") and ".pool." not in d and not d.endswith(".recycle")
    ]
    left = sorted(os.listdir(tmp_path / run))
    # load's column files stay only if a live table refers to them; "last" refers to mid's new
    # column only, so load.c0..c2 and mid's pass-through references are gone.
    assert left == ["last.sipc", "mid.c3"]
    assert seen == ["load", "mid", "last"]


def test_an_arena_output_is_not_copied(tmp_path):
    def produce(t, ctx):
        out = ctx.arena.empty(t.num_rows, np.float64)
        np.multiply(t["b"].to_numpy(), 2.0, out=out)
        return t.append_column("b2", pa.array(out))

    dag = DAG()
    dag.node(produce, dag.node(load), ctx=True, name="produce")
    res = dag.run(root=str(tmp_path))
    assert res.nodes["produce"]["bytes_copied"] == 0
    assert res["produce"].equals(dag.run_inline()["produce"])


def test_the_shared_memory_pool_removes_the_copy_of_pyarrow_outputs(tmp_path):
    from attune.pipelines import shmpool

    ok, why = shmpool.available()
    if not ok:
        pytest.skip(f"no shared memory pool here: {why}")
    dag = DAG()
    dag.node(add_col, dag.node(load))
    # A process per node: a reused worker copies a small output out of its pool on purpose
    # (_small_pool_output), which this 400 KB column would be.
    on = dag.run(root=str(tmp_path), memory_pool="shm", processes="node")
    off = dag.run(root=str(tmp_path), memory_pool="default", processes="node")
    assert on.memory_pool == "shm" and off.memory_pool == "default"
    assert on.nodes["add_col"]["bytes_copied"] == 0
    assert off.nodes["add_col"]["bytes_copied"] >= 50_000 * 8
    assert on["add_col"].equals(off["add_col"])
    assert on["add_col"].equals(dag.run_inline()["add_col"])


def test_pool_segments_nothing_refers_to_are_removed(tmp_path):
    from attune.pipelines import shmpool

    if not shmpool.available()[0]:
        pytest.skip("no shared memory pool here")

    def temporaries(t):
        for _ in range(3):
            pc.multiply(t["a"], 7)  # freed before the node returns
        return t.select(["a"])

    dag = DAG()
    dag.node(temporaries, dag.node(load), name="tmp")
    # A process per node: a reused worker removes what it let go of after its report, which
    # may be after the run ended.
    res = dag.run(root=str(tmp_path), memory_pool="shm", keep_directory=True, processes="node")
    (run,) = [
        d
        for d in os.listdir(tmp_path)
        if d.startswith("attune-dag.") and ".pool." not in d and not d.endswith(".recycle")
    ]
    assert not [f for f in os.listdir(tmp_path / run) if f.startswith("tmp.pool.")]
    assert res.nodes["tmp"]["bytes_copied"] == 0


# -- reused node processes ------------------------------------------------------------------


@pytest.fixture
def no_small_output_copy(monkeypatch):
    # Reused workers copy small pool-made outputs out of the pool (see the test below); these
    # tests check sharing by reference, so they switch that off.
    from attune.pipelines import dag as dag_module

    monkeypatch.setattr(dag_module, "SMALL_OUTPUT_BYTES", 0)


@pytest.mark.parametrize("pool", ["shm", "default"])
def test_reused_processes_give_the_same_tables(tmp_path, pool, no_small_output_copy):
    from attune.pipelines import shmpool

    if pool == "shm" and not shmpool.available()[0]:
        pytest.skip("no shared memory pool here")
    dag = DAG()
    build(dag)
    res = dag.run(root=str(tmp_path), reuse_processes=True, parallel=1, memory_pool=pool)
    assert res["join"].equals(dag.run_inline()["join"])
    assert res.reuse_processes and res.memory_pool == pool
    # One worker ran all five nodes, and a pyarrow-made column was still not copied.
    assert len({n["pid"] for n in res.nodes.values()}) == 1
    assert all(n["reused_process"] for n in res.nodes.values())
    if pool == "shm":
        assert res.nodes["add_col"]["bytes_copied"] == 0
    assert no_run_directories(tmp_path)


def test_reused_processes_keep_nothing_of_a_finished_node(tmp_path, no_small_output_copy):
    from attune.pipelines import shmpool

    if not shmpool.available()[0]:
        pytest.skip("no shared memory pool here")

    def temporaries(t):
        for _ in range(3):
            pc.multiply(t["a"], 7)  # freed before the node returns
        return t.append_column("a2", pc.multiply(t["a"], 2))

    dag = DAG()
    src = dag.node(load)
    mid = dag.node(temporaries, src, name="tmp")
    dag.node(lambda t: t.select(["a2"]), mid, name="last")
    for pool in ("shm-bump", "shm"):
        root = tmp_path / pool
        root.mkdir()
        res = dag.run(
            root=str(root), reuse_processes=True, parallel=1, keep_directory=True, memory_pool=pool
        )
        (run,) = [
            d
            for d in os.listdir(root)
            if d.startswith("attune-dag.") and ".pool." not in d and not d.endswith(".recycle")
        ]
        left = sorted(f for f in os.listdir(root / run) if ".pool." in f)
        assert res.nodes["tmp"]["pool_bytes_retained"] == 0
        assert res["last"].equals(dag.run_inline()["last"])
        if pool == "shm-bump":
            # Only the segment holding a2 (which "last" refers to) is left of the pool's files.
            assert left == ["tmp.pool.0"]
        else:
            # Besides it, at most two spare segments the worker kept for a next node (renamed
            # for the node that would take them; removed with the run).
            assert "tmp.pool.0" in left and len(left) <= 3


def _one_mib_ints() -> pa.Table:
    return pa.table({"a": pa.array(np.arange(1 << 20, dtype=np.int64))})  # 8 MiB


def _a_temporary_beside_the_output(t: pa.Table) -> pa.Table:
    tmp = pc.multiply(t["a"], 3)  # 8 MiB from the pool, freed before the node returns
    out = pc.multiply(t["a"], 2)  # 8 MiB from the pool: the output
    del tmp
    return pa.table({"b": out})


def _a_new_column(t: pa.Table) -> pa.Table:
    return pa.table({"c": pc.multiply(t["b"], 5)})  # 8 MiB from the pool


def test_a_reused_workers_next_node_computes_in_the_pages_of_its_temporaries(
    tmp_path, no_small_output_copy
):
    """A large temporary of a node has a segment of its own, which the worker keeps warm when
    the output does not use it; the next node's new column lands in those pages instead of
    fresh tmpfs pages (each a page fault, an allocation and zeroing)."""
    from attune.pipelines import shmpool

    if not shmpool.available()[0]:
        pytest.skip("no shared memory pool here")
    dag = DAG()
    mid = dag.node(_a_temporary_beside_the_output, dag.node(_one_mib_ints), name="mid")
    dag.node(_a_new_column, mid, name="last")
    res = dag.run(root=str(tmp_path), processes="run", parallel=1)
    assert res["last"].equals(dag.run_inline()["last"])
    assert res.nodes["mid"]["pid"] == res.nodes["last"]["pid"]
    # The new column's 2,048 pages: none fresh (a few faults remain, reading the mapped input
    # maps 16 of its pages per fault).
    assert res.nodes["last"]["compute_page_faults"] < 2048 // 4
    assert res.nodes["mid"]["compute_page_faults"] >= 2 * 2048  # its own pages were fresh
    assert no_run_directories(tmp_path)


def test_a_large_block_freed_in_a_node_serves_its_next_large_request_warm(tmp_path):
    """utf8_upper reserves 1.5x its input and shrinks the block once filled: the freed block's
    own segment serves the next call's request of the larger size, pages and all, where a free
    list by size class would miss it."""
    import resource

    from attune.pipelines import shmpool

    if not shmpool.available()[0]:
        pytest.skip("no shared memory pool here")
    pool = shmpool.DetachedPool(str(tmp_path), "p")
    try:
        s = pa.array(["abcdefgh" * 12] * 50_000)  # 4.8 MB of characters: a 7.2 MB block
        pc.utf8_upper(s.slice(0, 10))  # the kernel's first call sets things up: not measured

        def faults() -> int:
            return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

        f0 = faults()
        first = pc.utf8_upper(s, memory_pool=pool.pool)
        f1 = faults()
        del first
        second = pc.utf8_upper(s, memory_pool=pool.pool)
        f2 = faults()
        assert second.equals(pc.utf8_upper(s))
        del second
        written_pages = 4_800_000 // 4096
        assert f1 - f0 >= written_pages  # fresh pages the first time
        assert f2 - f1 < written_pages // 4  # none of them fresh again
    finally:
        pool.close()


def test_deferred_release_reports_what_the_output_keeps(tmp_path):
    # Without memory measurement a reused worker returns a node's temporaries after reporting
    # it; the tables and the reported file bytes are the same as when it does so before.
    from attune.pipelines import shmpool

    if not shmpool.available()[0]:
        pytest.skip("no shared memory pool here")

    def temporaries(t):
        for _ in range(3):
            pc.multiply(t["a"], 7)
        return t.append_column("a2", pc.multiply(t["a"], 2))

    dag = DAG()
    mid = dag.node(temporaries, dag.node(load), name="tmp")
    dag.node(lambda t: t.select(["a2"]), mid, name="last")
    got = {}
    for measure in (True, False):
        res = dag.run(root=str(tmp_path), reuse_processes=True, parallel=1, measure_memory=measure)
        assert res["last"].equals(dag.run_inline()["last"])
        got[measure] = res.nodes["tmp"]["output_file_bytes"]
    assert got[False] == got[True]
    assert no_run_directories(tmp_path)


def test_a_small_output_leaves_the_pool_whole_for_the_next_node(tmp_path):
    from attune.pipelines import shmpool

    if not shmpool.available()[0]:
        pytest.skip("no shared memory pool here")

    def total(t):  # 64 MiB of temporaries, a one-row result
        return pa.table({"s": [pc.sum(pc.multiply(pa.array(np.arange(8 << 20)), 3)).as_py()]})

    dag = DAG()
    dag.node(total, dag.node(load), name="total")
    res = dag.run(root=str(tmp_path), reuse_processes=True, parallel=1, keep_directory=True)
    assert res["total"].equals(dag.run_inline()["total"])
    st = res.nodes["total"]
    assert 0 < st["bytes_copied"] < 4096  # the one row, copied out of the pool
    (run,) = [
        d
        for d in os.listdir(tmp_path)
        if d.startswith("attune-dag.") and ".pool." not in d and not d.endswith(".recycle")
    ]
    # Nothing of the output is in the node's segments: none is left but spares (at most two).
    assert len([f for f in os.listdir(tmp_path / run) if f.startswith("total.pool.")]) <= 2


_KEPT: list = []


def test_a_node_keeping_pool_memory_gets_a_fresh_worker_after_it(tmp_path):
    from attune.pipelines import shmpool

    if not shmpool.available()[0]:
        pytest.skip("no shared memory pool here")

    def keeps(t):
        _KEPT.append(pc.multiply(t["a"], 3))  # outlives the node in this process
        return t.select(["a"])

    dag = DAG()
    src = dag.node(load)
    k = dag.node(keeps, src, name="keeps")
    dag.node(lambda t: t.slice(5), k, name="after")
    res = dag.run(root=str(tmp_path), reuse_processes=True, parallel=1)
    assert res.nodes["keeps"]["pool_bytes_retained"] > 0
    assert res.nodes["after"]["pid"] != res.nodes["keeps"]["pid"]
    assert res.nodes["load"]["pid"] == res.nodes["keeps"]["pid"]
    assert res["after"].equals(dag.run_inline()["after"])
    assert no_run_directories(tmp_path)


def test_a_node_with_a_memory_limit_gets_its_own_process(tmp_path):
    dag = DAG()
    src = dag.node(load)
    dag.node(add_col, src, memory_limit_bytes=1 << 30)
    res = dag.run(root=str(tmp_path), reuse_processes=True, parallel=1)
    assert res.nodes["load"]["reused_process"] and not res.nodes["add_col"]["reused_process"]


# -- failures -------------------------------------------------------------------------------


@pytest.fixture(params=[False, True], ids=["own-process", "reused-process"])
def reuse(request) -> bool:
    return request.param


def fails(root, fn, match, reason, reuse=False, **node_kwargs):
    dag = DAG()
    dag.node(fn, dag.node(load), name="bad", **node_kwargs)
    with pytest.raises(NodeFailedError, match=match) as e:
        dag.run(root=str(root), reuse_processes=reuse)
    assert e.value.node == "bad" and e.value.reason == reason
    assert no_run_directories(root)
    return e.value


def test_a_node_that_raises(tmp_path, reuse):
    def boom(t):
        raise KeyError("no column q")

    err = fails(tmp_path, boom, r"node bad raised KeyError: 'no column q'", "exception", reuse)
    assert "boom" in err.detail


def test_a_node_that_returns_a_non_table(tmp_path, reuse):
    fails(
        tmp_path,
        lambda t: t.to_pandas(),
        r"node bad returned pandas.*DataFrame, not a "
        r"pyarrow.Table",
        "not-a-table",
        reuse,
    )


def test_a_node_that_runs_out_of_memory(tmp_path, reuse):
    def hog(t):
        return pa.table({"x": np.ones(1 << 28)})  # 2 GiB

    fails(
        tmp_path,
        hog,
        "node bad ran out of memory",
        "out-of-memory",
        reuse,
        memory_limit_bytes=256 << 20,
    )


def test_a_node_killed_like_the_oom_killer_does(tmp_path, reuse):
    def killed(t):
        os.kill(os.getpid(), signal.SIGKILL)

    fails(tmp_path, killed, "node bad was killed by SIGKILL .*OOM killer", "killed", reuse)


def test_a_node_that_exits(tmp_path, reuse):
    fails(tmp_path, lambda t: os._exit(3), "node bad exited with status 3", "exit", reuse)


def test_a_failure_kills_the_other_running_nodes(tmp_path):
    r, w = os.pipe()

    def waits_forever(t):
        os.read(r, 1)  # never written: only the kill ends it
        return t

    def boom(t):
        raise RuntimeError("stop")

    dag = DAG()
    src = dag.node(load)
    dag.node(waits_forever, src, name="slow")
    dag.node(boom, src, name="bad")
    with pytest.raises(NodeFailedError, match="node bad raised RuntimeError: stop"):
        dag.run(root=str(tmp_path), parallel=2)
    os.close(r)
    os.close(w)
    assert no_run_directories(tmp_path)


def test_bad_definitions():
    dag, other = DAG(), DAG()
    n = other.node(load)
    with pytest.raises(PipelineError, match="is not a node of this DAG"):
        dag.node(add_col, n)
    with pytest.raises(PipelineError, match="needs a function"):
        dag.node(3)  # type: ignore[arg-type]
    with pytest.raises(PipelineError, match="no nodes"):
        dag.run()
    dag.node(load)
    with pytest.raises(ValueError, match="unknown start method 'thread'"):
        dag.run(start_method="thread")
    with pytest.raises(ValueError, match="unknown transport"):
        dag.run(transport="pickle")
    with pytest.raises(ValueError, match="unknown mode 'threads'"):
        dag.run(mode="threads")


def test_ray_mode_without_ray_says_how_to_get_it(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    dag = DAG()
    dag.node(load)
    with pytest.raises(PipelineError, match=r"pip install 'attune\[ray\]'"):
        dag.run(mode="ray")


@pytest.mark.parametrize("reuse", [False, True])
def test_node_timelines_are_ordered_on_one_clock(tmp_path, reuse):
    # Every node's timeline (process clock shared by the run's processes): it starts after the
    # run, calls its function, shares its output, and the driver hears of it last; a consumer
    # starts after its inputs were shared.
    dag = DAG()
    _src, c, f, s, j = build(dag)
    res = dag.run(root=str(tmp_path), reuse_processes=reuse, measure_memory=False)
    assert res.started_at > 0
    for st in res.nodes.values():
        order = [
            res.started_at,
            st["started_at"],
            st["compute_started_at"],
            st["compute_ended_at"],
            st["ended_at"],
            st["reported_at"],
        ]
        assert order == sorted(order)
    for n in (c, f, s, j):
        for i in n.inputs:
            assert res.nodes[n.name]["started_at"] >= res.nodes[i.name]["ended_at"]


def _deferred_unmap_child(directory, conn):
    from attune.pipelines import shmpool

    try:
        shmpool.install(directory, "n")
        buf = pa.allocate_buffer(1 << 20)
        (path,) = [p for _a, _n, p in shmpool.segments()]
        del buf
        shmpool.freeze()

        def mapped() -> bool:
            with open("/proc/self/maps") as f:
                return any(line.rstrip().endswith(path) for line in f)

        before = mapped()
        shmpool.release({}, recycle=False, defer=True)
        deferred = (mapped(), shmpool.segments(), os.path.exists(path))
        shmpool.finish_release()
        conn.send((before, *deferred, mapped(), os.path.exists(path)))
    except BaseException as e:  # noqa: BLE001 - reported to the test
        conn.send(repr(e))


def test_a_deferred_release_unmaps_the_segments_after_the_report(tmp_path):
    # A reused worker releases a node's segments before reporting it, but unmaps them (a TLB
    # shootdown) and removes their files only in finish_release, after the report: until then
    # the pool has forgotten them (no allocation lands there) and they are still mapped.
    import multiprocessing as mp

    from attune.pipelines import shmpool

    if not shmpool.available()[0]:
        pytest.skip("no shared memory pool here")
    ctx = mp.get_context("fork")
    a, b = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_deferred_unmap_child, args=(str(tmp_path), b))
    p.start()
    got = a.recv()
    p.join()
    assert got == (True, True, [], True, False, False)


def _broken(t: pa.Table) -> pa.Table:
    raise RuntimeError("unrelated branch broken")


def test_a_table_of_rows_without_columns_round_trips():
    dag = DAG("nocols")
    src = dag.node(lambda: pa.table({"a": [1, 2, 3]}, metadata={"k": "v"}), name="src")
    nocols = dag.node(lambda t: t.select([]), src, name="nocols")
    dag.node(lambda t: pa.table({"n": [t.num_rows]}), nocols, name="count")
    res = dag.run(outputs=["nocols", "count"])
    assert (res["nocols"].num_rows, res["nocols"].num_columns) == (3, 0)
    assert res["nocols"].equals(dag.run_inline(["nocols"])["nocols"])
    assert res["nocols"].schema.metadata == {b"k": b"v"}
    assert res["count"].to_pydict() == {"n": [3]}


def test_outputs_run_only_what_they_need():
    dag = DAG("outputs")
    src = dag.node(load, name="src")
    dag.node(_broken, src, name="broken")
    dag.node(add_col, src, name="fast")
    res = dag.run(outputs=["fast"])
    assert sorted(res.nodes) == ["fast", "src"]
    assert list(res) == ["fast"] and "fast" in res and len(res) == 1
    assert list(res.keys()) == ["fast"]
    assert res["fast"].equals(dag.run_inline(outputs=["fast"])["fast"])
    with pytest.raises(NodeFailedError, match="node broken raised RuntimeError"):
        dag.run()


def test_run_inline_fails_as_run_does_and_names_are_unique():
    dag = DAG("inline")
    src = dag.node(load, name="src")
    dag.node(_broken, src, name="broken")
    with pytest.raises(NodeFailedError) as e:
        dag.run_inline()
    assert (e.value.node, e.value.reason) == ("broken", "exception")
    assert isinstance(e.value.__cause__, RuntimeError)
    assert "unrelated branch broken" in e.value.detail
    # An exception without a message leaves no dangling colon; the message ends with where
    # the node raised (the last frame of its traceback), as Ray's one-line errors do.
    d = DAG("bare")

    def bare() -> pa.Table:
        raise ValueError()

    d.node(bare, name="n")
    for run in (d.run_inline, d.run):
        with pytest.raises(
            NodeFailedError,
            match=r"^node n raised ValueError \(at test_pipelines_dag\.py:\d+, in bare\)$",
        ):
            run()
    with pytest.raises(PipelineError, match="duplicate node name 'src'"):
        dag.node(load, name="src")
    # A name taken from the function still gets a suffix.
    assert dag.node(load).name == "load" and dag.node(load).name == "load_2"


def test_a_bad_spill_dir_is_refused_before_any_node_runs(tmp_path):
    ran = tmp_path / "ran"
    dag = DAG("spill")
    dag.node(lambda: (ran.touch(), pa.table({"a": [1]}))[1], name="src")
    for bad, what in ((tmp_path / "missing", "does not exist"), (ran, "is not a directory")):
        if bad == ran:
            ran.touch()
        with pytest.raises(PipelineError, match=what):
            dag.run(memory_budget_bytes=1 << 30, eviction="limit-drop", spill_dir=str(bad))
        if bad != ran:
            assert not ran.exists()


def _sleeps(t: pa.Table) -> pa.Table:
    import time

    time.sleep(60)  # were it not stopped, the run would succeed after this
    return t


@pytest.mark.parametrize("reuse", [False, True])
def test_a_node_past_its_timeout_is_stopped_and_fails_the_run(tmp_path, reuse):
    dag = DAG("slow")
    dag.node(_sleeps, dag.node(load), name="sleeper", timeout_s=0.5)
    with pytest.raises(
        NodeFailedError, match=r"node sleeper ran longer than its timeout_s \(0.5 s\)"
    ) as e:
        dag.run(root=str(tmp_path), reuse_processes=reuse)
    assert e.value.reason == "timeout"
    assert os.listdir(tmp_path) == []
    for bad in (0, -1, float("inf"), float("nan"), "1", True):
        with pytest.raises(PipelineError, match="timeout_s must be a positive number"):
            dag.node(_sleeps, name=f"bad{len(dag.nodes)}", timeout_s=bad)


_UNGUARDED_SCRIPT = """
import sys

import pyarrow as pa
import pyarrow.compute as pc

from attune.pipelines import DAG, WorkerPool


def load():
    return pa.table({"x": [1, 2, 3]})


def double(t):
    return t.append_column("y", pc.multiply(t["x"], 2))


root, processes, guard = sys.argv[1], sys.argv[2], sys.argv[3] == "guard"


def main():
    dag = DAG()
    dag.node(double, dag.node(load))
    if processes == "pool":
        with WorkerPool(2, start_method="spawn", root=root) as pool:
            print(dag.run(pool=pool, root=root)["double"].column("y").to_pylist())
    else:
        print(dag.run(start_method="spawn", processes=processes, root=root)["double"]
              .column("y").to_pylist())


if guard:
    if __name__ == "__main__":
        main()
else:
    main()  # at module level: a spawned process importing this file runs it again
"""


@pytest.mark.parametrize("processes", ["run", "node", "pool"])
def test_spawn_with_a_main_module_that_runs_the_dag_unguarded_says_so(tmp_path, processes):
    """A script that runs a DAG at module level under spawn: every spawned process imports
    the main module first and would start the run again. The run fails with an error that
    says so and what to do, not with a node's failure, and leaves no files; the same script
    with the guard runs."""
    import subprocess
    import sys

    script = tmp_path / "script.py"
    script.write_text(_UNGUARDED_SCRIPT)
    root = tmp_path / "root"
    root.mkdir()
    for guard in ("no-guard", "guard"):
        p = subprocess.run(
            [sys.executable, str(script), str(root), processes, guard],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if guard == "guard":
            assert p.returncode == 0, p.stderr
            assert p.stdout.strip() == "[2, 4, 6]"
        else:
            assert p.returncode != 0
            last = p.stderr.strip().splitlines()[-1]
            assert last.startswith("attune.pipelines.dag.UnguardedMainError: "), p.stderr
            assert 'if __name__ == "__main__":' in last
            assert 'start_method="fork"' in last
            assert str(script) in last
            assert "NodeFailedError" not in p.stderr
        assert os.listdir(root) == []


def _warmed_here(t: pa.Table) -> pa.Table:
    from attune.pipelines import dag as dag_module

    return pa.table({"warmed": [dag_module.pyarrow_warmed]})


@pytest.mark.parametrize("processes", ["run", "node"])
def test_forked_node_processes_inherit_pyarrows_lazily_built_state(tmp_path, processes):
    # Acero's group-by machinery costs ~40 ms of CPU on first use in a process: the driver
    # builds it once before forking, so workers forked for every run do not each build it.
    dag = DAG("warm")
    dag.node(_warmed_here, dag.node(lambda: pa.table({"a": [1]}), name="src"), name="w")
    res = dag.run(root=str(tmp_path), processes=processes)
    assert res["w"]["warmed"].to_pylist() == [True]
    assert [d for d in os.listdir(tmp_path) if d.startswith("attune-dag.")] == []
