"""Worker pools that outlive runs: the same tables as one process, the same workers run after
run, a crashed worker fails only its run and is replaced, and nothing is left in the file
system."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from attune.pipelines import DAG, NodeFailedError, PipelineError, WorkerPool


def load() -> pa.Table:
    rng = np.random.default_rng(11)
    return pa.table({"a": pa.array(rng.integers(0, 1000, 40_000)), "b": rng.random(40_000)})


def add_col(t: pa.Table) -> pa.Table:
    return t.append_column("c", pc.multiply(t["a"], t["b"]))


def chain(length: int = 4) -> DAG:
    dag = DAG("pooled")
    prev = dag.node(load)
    prev = dag.node(add_col, prev)
    for i in range(2, length):
        # Closures: shipped by value (cloudpickle).
        prev = dag.node(
            lambda t, i=i: t.append_column(f"n{i}", pc.add(t["a"], i)), prev, name=f"n{i}"
        )
    return dag


def leftovers(root) -> list[str]:
    """Run directories under root (a pool's own directory is not a run's)."""
    return [
        d
        for d in os.listdir(root)
        if d.startswith("attune-dag.") and ".pool." not in d and not d.endswith(".recycle")
    ]


@pytest.fixture
def pool(tmp_path):
    with WorkerPool(2, root=str(tmp_path)) as p:
        yield p
    assert not os.path.exists(p.directory)


def test_runs_reuse_the_same_workers_and_match_one_process(tmp_path, pool):
    dag = chain()
    want = dag.run_inline()
    pids = set()
    for measure in (True, False, False):
        res = dag.run(root=str(tmp_path), pool=pool, measure_memory=measure)
        assert res.tables.keys() == want.keys()
        for k, t in want.items():
            assert res[k].equals(t)
        assert res.reuse_processes and all(n["reused_process"] for n in res.nodes.values())
        pids |= {n["pid"] for n in res.nodes.values()}
        assert leftovers(tmp_path) == []
    # Three runs, at most the pool's two workers, none of them started again.
    assert len(pids) <= 2 and pool.started == 2
    assert set(pool.idle_pids()) >= pids
    assert os.getpid() not in pids


def test_spare_segments_wait_in_the_pool_directory(tmp_path, pool):
    from attune.pipelines import shmpool

    if not shmpool.available()[0]:
        pytest.skip("no shared memory pool here")

    def temporaries(t):
        for _ in range(3):
            pc.multiply(pa.array(np.arange(4 << 20)), 7)  # 32 MiB each, freed
        return t.append_column("a2", pc.multiply(t["a"], 2))

    dag = DAG()
    dag.node(temporaries, dag.node(load), name="tmp")
    for _ in range(2):
        res = dag.run(root=str(tmp_path), pool=pool, parallel=1, memory_pool="shm")
        assert res["tmp"].equals(dag.run_inline()["tmp"])
        assert leftovers(tmp_path) == []
    # Whatever the workers kept for their next node is in the pool's directory, at most two
    # segments per worker.
    assert all(f.startswith("spare.") for f in os.listdir(pool.directory))
    assert len(os.listdir(pool.directory)) <= 2 * pool.size


def _meet(directory: str, name: str, other: str) -> None:
    """Both nodes of a pair are running at once (so in two workers): each waits for the other."""
    open(os.path.join(directory, name), "w").close()
    for _ in range(6000):
        if os.path.exists(os.path.join(directory, other)):
            return
        time.sleep(0.01)
    raise TimeoutError(f"{other} never started")


def test_workers_park_their_spares_under_names_of_their_own(tmp_path, pool):
    # Two workers of one pool each keep a large temporary as a spare in the pool's directory;
    # a spare parked under a name another worker's spare already had replaced that file, and
    # the worker that took the name next wrote its node's output into a file readers no
    # longer saw (wrong results in DABstep DAG 2 with a pool). Then both take their spares.
    from attune.pipelines import shmpool

    if not shmpool.available()[0]:
        pytest.skip("no shared memory pool here")
    gates = tmp_path / "gates"
    gates.mkdir()

    def pair(run: int, me: str, other: str):
        def fn(t):
            _meet(str(gates), f"{run}.{me}", f"{run}.{other}")
            pc.multiply(pa.array(np.arange(4 << 20)), 7)  # 32 MiB, freed: a spare
            k = 3 if me == "x" else 5
            return pa.table({"v": pc.multiply(pa.array(np.arange(3 << 20)), k)})  # 24 MiB

        return fn

    outputs = {}
    for run in range(2):
        dag = DAG()
        src = dag.node(load)
        dag.node(pair(run, "x", "y"), src, name="x")
        dag.node(pair(run, "y", "x"), src, name="y")
        res = dag.run(root=str(tmp_path), pool=pool, parallel=2, memory_pool="shm")
        assert res.nodes["x"]["pid"] != res.nodes["y"]["pid"]
        outputs[run] = {k: res[k] for k in ("x", "y")}
        if run == 0:
            # Each worker's temporary (a segment of its own, twice its 32 MiB) waits under a
            # name that carries the worker's process id: no worker can take another's name.
            owners = {f.split(".")[1] for f in os.listdir(pool.directory)}
            assert owners == {str(res.nodes["x"]["pid"]), str(res.nodes["y"]["pid"])}
    for run in range(2):
        assert outputs[run]["x"]["v"].equals(pa.chunked_array([np.arange(3 << 20) * 3]))
        assert outputs[run]["y"]["v"].equals(pa.chunked_array([np.arange(3 << 20) * 5]))
    assert leftovers(tmp_path) == []


def _scale(k: int):
    return lambda t: t.append_column(f"s{k}", pc.multiply(t["a"], k))


def _maps_under(pid: int, directory: str) -> list[str]:
    with open(f"/proc/{pid}/maps") as f:
        return [line for line in f if directory in line]


def test_a_worker_keeps_an_input_mapped_while_other_nodes_read_it(tmp_path):
    # One source, four consumers, one worker: the consumers after the first find the source
    # still mapped; the last consumer lets it go, and once the run ended the worker keeps
    # nothing of it.
    dag = DAG("wide")
    src = dag.node(load)
    for k in range(4):
        dag.node(_scale(k), src, name=f"c{k}")
    want = dag.run_inline()
    with WorkerPool(1, root=str(tmp_path)) as pool:
        res = dag.run(root=str(tmp_path), pool=pool, measure_memory=False)
        for k, t in want.items():
            assert res[k].equals(t)
        held = [res.nodes[f"c{k}"]["held_inputs"] for k in range(4)]
        assert held == [0, 1, 1, 1]
        # With memory measured (or a budget) nothing is kept between nodes.
        measured = dag.run(root=str(tmp_path), pool=pool, measure_memory=True)
        assert [measured.nodes[f"c{k}"]["held_inputs"] for k in range(4)] == [0, 0, 0, 0]
    assert leftovers(tmp_path) == []


def test_a_worker_drops_what_it_kept_when_its_run_ends(tmp_path):
    # A worker (here on a thread, driven by hand) keeps a flagged input mapped after its node,
    # and unmaps it on the goodbye a pool sends when the run ends.
    import multiprocessing as mp

    from attune.pipelines import dag as dagmod
    from attune.pipelines import sipc

    first = sipc.write_table(load(), str(tmp_path), "first").path
    second = sipc.write_table(load(), str(tmp_path), "second").path
    node = dagmod.Node("add_col", add_col, ())
    here, there = mp.Pipe(duplex=True)
    worker = threading.Thread(target=dagmod._worker_main, args=([node], there))
    worker.start()

    def job(path: str, out: str, hold: bool) -> dict:
        here.send(
            (0, [path], "default", False, out, True, str(tmp_path), "sipc", False, [hold], None)
        )
        msg = here.recv()
        assert msg[0] == "ok", msg
        return msg[2]

    def mapped(name: str) -> bool:
        return bool(_maps_under(os.getpid(), os.path.join(str(tmp_path), name)))

    try:
        assert job(first, "o1", hold=True)["held_inputs"] == 0
        assert job(first, "o2", hold=True)["held_inputs"] == 1
        assert mapped("first.")
        here.send(dagmod.FORGET)
        assert job(second, "o3", hold=False)["held_inputs"] == 0
        assert not mapped("first.")
    finally:
        here.send(None)
        worker.join()
    # An input not flagged is unmapped right after the node's report.
    assert not mapped("second.")


def test_the_default_pool_after_the_shared_one_in_the_same_worker(tmp_path, pool):
    dag = DAG()
    dag.node(add_col, dag.node(load))
    a = dag.run(root=str(tmp_path), pool=pool, parallel=1, memory_pool="auto")
    b = dag.run(root=str(tmp_path), pool=pool, parallel=1, memory_pool="default")
    assert a["add_col"].equals(b["add_col"])
    # With pyarrow's own pool the new column is copied into the column files.
    assert b.nodes["add_col"]["bytes_copied"] >= 40_000 * 8
    assert leftovers(tmp_path) == []


def killer(t: pa.Table) -> pa.Table:
    os.kill(os.getpid(), signal.SIGKILL)
    return t


def test_a_crashed_worker_fails_only_its_run_and_is_replaced(tmp_path, pool):
    good = chain()
    bad = DAG("bad")
    bad.node(killer, bad.node(load), name="dies")
    assert pool.started == 2 and len(pool.idle_pids()) == 2  # prestarted
    for crash in (1, 2):
        with pytest.raises(NodeFailedError, match="node dies was killed by SIGKILL") as e:
            bad.run(root=str(tmp_path), pool=pool, parallel=1)
        assert e.value.reason == "killed"
        assert leftovers(tmp_path) == []
        assert len(pool.idle_pids()) == 2 - crash  # the dead one is forgotten
        res = good.run(root=str(tmp_path), pool=pool, parallel=1)
        assert res["n3"].equals(good.run_inline()["n3"])
    # Both prestarted workers died; the second good run started a replacement.
    assert pool.started == 3
    assert len(pool.idle_pids()) == 1


def test_a_failing_node_kills_its_runs_other_nodes_not_the_idle_workers(tmp_path):
    r, w = os.pipe()

    def waits_forever(t):
        os.read(r, 1)  # never written: only the kill ends it
        return t

    def boom(t):
        raise RuntimeError("stop")

    with WorkerPool(3, root=str(tmp_path)) as pool:
        warm = DAG("fan")
        src = warm.node(load)
        for k in range(3):
            warm.node(lambda t, k=k: t.slice(k), src, name=f"s{k}")
        warm.run(root=str(tmp_path), pool=pool, parallel=3)
        idle_before = set(pool.idle_pids())
        assert len(idle_before) == 3
        dag = DAG()
        src = dag.node(load)
        dag.node(waits_forever, src, name="slow")
        dag.node(boom, src, name="bad")
        with pytest.raises(NodeFailedError, match="node bad raised RuntimeError: stop"):
            dag.run(root=str(tmp_path), pool=pool, parallel=3)
        assert leftovers(tmp_path) == []
        # The workers that ran "bad" and "slow" are gone (killed); the third, idle
        # throughout, is still the pool's.
        assert len(set(pool.idle_pids()) & idle_before) == 1
        res = warm.run(root=str(tmp_path), pool=pool)
        for k, t in warm.run_inline().items():
            assert res[k].equals(t)
    os.close(r)
    os.close(w)


def test_a_worker_that_died_while_idle_is_replaced(tmp_path, pool):
    dag = chain(2)
    dag.run(root=str(tmp_path), pool=pool, parallel=1)
    pid = pool.idle_pids()[-1]  # the next one a run takes
    os.kill(pid, signal.SIGKILL)
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # dead (not reaped: the pool does)
    res = dag.run(root=str(tmp_path), pool=pool, parallel=1)
    assert res["add_col"].equals(dag.run_inline()["add_col"])
    assert pid not in {n["pid"] for n in res.nodes.values()}


def test_runs_on_two_threads_share_a_pool(tmp_path, pool):
    dags = [chain(3), chain(5)]
    out: dict[int, object] = {}

    def go(k):
        out[k] = dags[k].run(root=str(tmp_path), pool=pool, parallel=1)

    threads = [threading.Thread(target=go, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, dag in enumerate(dags):
        want = dag.run_inline()
        for name, t in want.items():
            assert out[k][name].equals(t)  # type: ignore[index]
    assert leftovers(tmp_path) == []


def test_a_function_that_cannot_be_shipped_is_named(tmp_path, pool):
    lock = threading.Lock()
    dag = DAG()
    dag.node(lambda t: t.slice(0, 1 if lock.locked() else 2), dag.node(load), name="locked")
    with pytest.raises(PipelineError, match="node locked: its function cannot be shipped"):
        dag.run(root=str(tmp_path), pool=pool)
    assert leftovers(tmp_path) == []


def test_a_closed_pool_refuses_runs(tmp_path):
    pool = WorkerPool(1, root=str(tmp_path))
    chain(2).run(root=str(tmp_path), pool=pool)
    pool.close()
    pool.close()
    assert not os.path.exists(pool.directory)
    with pytest.raises(PipelineError, match="the worker pool is closed"):
        chain(2).run(root=str(tmp_path), pool=pool)
    with pytest.raises(ValueError, match="size >= 1"):
        WorkerPool(0)


# -- a driver killed mid-run ------------------------------------------------------------------


def removed_soon(root, seconds: float = 60.0) -> list[str]:
    """What is left in ``root`` once it is empty or ``seconds`` have passed: an orphaned node
    process has a small clean-up process remove the run's files after it exits (generous: it
    takes well under a second when it works)."""
    import time

    deadline = time.monotonic() + seconds
    while os.listdir(root) and time.monotonic() < deadline:
        time.sleep(0.05)
    return os.listdir(root)


def _driver(root: str, gate: int, told: int, how: str) -> None:
    """A DAG driver whose second node waits on ``gate`` after writing its pid to ``told``."""

    def waits(t):
        os.write(told, b"x")
        os.read(gate, 1)
        return t

    dag = DAG("killed")
    dag.node(waits, dag.node(load), name="waits")
    if how == "pool":
        with WorkerPool(1, root=root) as pool:
            dag.run(root=root, pool=pool)
    else:
        dag.run(root=root, reuse_processes=how == "reuse", parallel=1)


@pytest.mark.parametrize("how", ["fork", "reuse", "pool"])
def test_a_killed_drivers_files_are_removed_by_its_surviving_node_process(tmp_path, how):
    import multiprocessing as mp

    gate_r, gate_w = os.pipe()
    told_r, told_w = os.pipe()
    alive_r, alive_w = os.pipe()  # inherited by the driver and its node processes
    driver = mp.get_context("fork").Process(
        target=_driver, args=(str(tmp_path), gate_r, told_w, how)
    )
    driver.start()
    os.close(alive_w)
    assert os.read(told_r, 1) == b"x"  # the node runs: the run's files exist
    assert any(d.startswith("attune-dag.") for d in os.listdir(tmp_path))
    os.kill(driver.pid, signal.SIGKILL)
    driver.join()
    os.write(gate_w, b"x")  # let the orphaned node finish
    assert os.read(alive_r, 1) == b""  # every process holding the pipe has exited
    for fd in (gate_r, gate_w, told_r, told_w, alive_r):
        os.close(fd)
    assert removed_soon(tmp_path) == []


def _driver_of_two(root: str, gate: int, told: int, how: str) -> None:
    """A DAG driver with two nodes side by side, each writing its pid to ``told``: ``quick``
    returns (its worker goes idle), ``stuck`` waits on ``gate`` (never opened)."""

    def quick(t):
        os.write(told, b"%08d" % os.getpid())
        return t

    def stuck(t):
        os.write(told, b"%08d" % os.getpid())
        os.read(gate, 1)
        return t

    dag = DAG("killed")
    src = dag.node(load)
    dag.node(quick, src, name="quick")
    dag.node(stuck, src, name="stuck")
    if how == "pool":
        with WorkerPool(2, root=root) as pool:
            dag.run(root=root, pool=pool, parallel=2)
    else:
        dag.run(root=root, reuse_processes=how == "reuse", parallel=2)


@pytest.mark.parametrize("how", ["fork", "reuse", "pool"])
def test_no_node_process_outlives_a_killed_driver_whether_idle_or_stuck(tmp_path, how):
    """An idle worker must not wait for a sibling (which inherited its pipe's driver end with
    the fork) and a node still running must not run on for no one: both exit, and the run's
    files go, soon after the driver is killed."""
    import multiprocessing as mp
    import select

    gate_r, gate_w = os.pipe()
    told_r, told_w = os.pipe()
    alive_r, alive_w = os.pipe()  # inherited by the driver and its node processes
    driver = mp.get_context("fork").Process(
        target=_driver_of_two, args=(str(tmp_path), gate_r, told_w, how)
    )
    driver.start()
    os.close(alive_w)
    pids = [int(os.read(told_r, 8)) for _ in range(2)]
    os.kill(driver.pid, signal.SIGKILL)
    driver.join()
    # Generous: the processes exit within a second or two of the kill when it works; never
    # when it does not.
    gone = select.select([alive_r], [], [], 120)[0] and os.read(alive_r, 1) == b""
    for pid in pids:  # whatever the outcome, nothing is left running
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for fd in (gate_r, gate_w, told_r, told_w, alive_r):
        os.close(fd)
    assert gone, "a node process outlived its killed driver"
    assert removed_soon(tmp_path) == []


_CTRL_C_DRIVER = """
import os, signal, sys, time
import pyarrow as pa
from attune.pipelines import DAG

# As in a terminal (a background job of a shell without job control starts with it ignored).
signal.signal(signal.SIGINT, signal.default_int_handler)

marks = sys.argv[1]

def load():
    return pa.table({"a": [1, 2]})

def quick(t):
    open(os.path.join(marks, "quick"), "w").close()
    return t

def slow(t):
    open(os.path.join(marks, "slow"), "w").close()
    time.sleep(60)
    return t

d = DAG("ctrl-c")
s = d.node(load)
d.node(quick, s)
d.node(slow, s)
d.run(root=sys.argv[2], reuse_processes=sys.argv[3] == "reuse", parallel=2)
"""


@pytest.mark.parametrize("how", ["fork", "reuse"])
def test_ctrl_c_stops_the_run_with_the_drivers_traceback_only(tmp_path, how):
    """Ctrl-C reaches the terminal's whole process group: the driver stops the run, and its
    node processes (one idle, one busy) neither print tracebacks of their own nor outlive it."""
    import subprocess
    import sys
    import time

    script = tmp_path / "driver.py"
    script.write_text(_CTRL_C_DRIVER)
    marks, root = tmp_path / "marks", tmp_path / "root"
    marks.mkdir()
    root.mkdir()
    p = subprocess.Popen(
        [sys.executable, str(script), str(marks), str(root), how],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while len(os.listdir(marks)) < 2 and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)
    time.sleep(0.5)  # the quick node's worker back to waiting for a job
    os.killpg(p.pid, signal.SIGINT)
    try:
        out = p.communicate(timeout=120)[0].decode()
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert out.count("Traceback") == 1 and "KeyboardInterrupt" in out, out
    assert "Process attune-dag" not in out, out
    assert removed_soon(root) == []


def _terminated_driver(root: str, gate: int, told: int) -> None:
    from attune.pipelines.dag import exit_on_sigterm

    exit_on_sigterm()  # as `attune dag run` and `attune bench dag` do
    _driver(root, gate, told, "reuse")


def test_a_terminated_driver_cleans_up_before_it_exits(tmp_path):
    import multiprocessing as mp

    gate_r, gate_w = os.pipe()
    told_r, told_w = os.pipe()
    driver = mp.get_context("fork").Process(
        target=_terminated_driver, args=(str(tmp_path), gate_r, told_w)
    )
    driver.start()
    assert os.read(told_r, 1) == b"x"
    os.kill(driver.pid, signal.SIGTERM)
    driver.join()
    assert driver.exitcode == 128 + signal.SIGTERM  # SystemExit, after the run's cleanup
    for fd in (gate_r, gate_w, told_r, told_w):
        os.close(fd)
    assert os.listdir(tmp_path) == []
