"""What ``DAG.run()`` does by default: nodes run in the shared worker pool of the process,
started by the first run and kept for the next; a fork per node and workers of one run stay
available; failures fail the run and leave no run files."""

from __future__ import annotations

import os
import threading

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from attune.errors import InvalidArgumentError
from attune.pipelines import DAG, NodeFailedError, close_shared_pools, shared_pool


def load() -> pa.Table:
    return pa.table({"a": pa.array(range(10_000)), "b": pa.array(range(10_000, 20_000))})


def add(t: pa.Table) -> pa.Table:
    return t.append_column("c", pc.add(t["a"], t["b"]))


def pid(t: pa.Table) -> pa.Table:
    return pa.table({"pid": [os.getpid()]})


def boom(t: pa.Table) -> pa.Table:
    raise ValueError("boom")


def run_dirs(root) -> list[str]:
    return [d for d in os.listdir(root) if d.startswith("attune-dag.") and ".pool." not in d]


def test_default_runs_use_the_same_shared_workers(tmp_path):
    dag = DAG()
    dag.node(pid, dag.node(load))
    first = dag.run(root=str(tmp_path))
    second = dag.run(root=str(tmp_path))
    assert first.processes == "shared" and first.reuse_processes
    pool = shared_pool(root=str(tmp_path))
    assert pool.started == pool.size  # the first run started them, the second none
    workers = set(pool.idle_pids())
    assert first["pid"]["pid"][0].as_py() in workers
    assert second["pid"]["pid"][0].as_py() in workers
    assert first["pid"]["pid"][0].as_py() != os.getpid()


def test_default_equals_a_process_per_node_and_inline(tmp_path):
    dag = DAG()
    dag.node(add, dag.node(load))
    shared = dag.run(root=str(tmp_path))
    per_node = dag.run(root=str(tmp_path), processes="node")
    run_workers = dag.run(root=str(tmp_path), processes="run")
    assert per_node.processes == "node" and not per_node.reuse_processes
    assert run_workers.processes == "run"
    inline = dag.run_inline()["add"]
    for r in (shared, per_node, run_workers):
        assert r["add"].equals(inline)
    assert run_dirs(tmp_path) == []


def test_functions_made_after_the_workers_started_reach_them(tmp_path):
    warm = DAG()
    warm.node(load)
    warm.run(root=str(tmp_path))  # the shared workers start here
    k = 5

    dag = DAG()
    dag.node(lambda t: t.append_column("k", pc.add(t["a"], k)), dag.node(load), name="late")
    out = dag.run(root=str(tmp_path))
    assert out.processes == "shared"
    assert out["late"]["k"].to_pylist()[:2] == [5, 6]


def test_a_function_that_cannot_be_pickled_runs_in_workers_of_its_run(tmp_path):
    lock = threading.Lock()

    def locked(t: pa.Table) -> pa.Table:
        with lock:
            return add(t)

    dag = DAG()
    dag.node(locked, dag.node(load), name="locked")
    out = dag.run(root=str(tmp_path))
    assert out.processes == "run"
    assert out["locked"].equals(add(load()))
    assert run_dirs(tmp_path) == []


def test_a_failing_node_fails_the_run_and_the_pool_goes_on(tmp_path):
    dag = DAG()
    dag.node(boom, dag.node(load), name="boom")
    with pytest.raises(NodeFailedError) as e:
        dag.run(root=str(tmp_path))
    assert e.value.node == "boom" and e.value.reason == "exception"
    assert run_dirs(tmp_path) == []
    ok = DAG()
    ok.node(add, ok.node(load))
    assert ok.run(root=str(tmp_path))["add"].num_rows == 10_000


def test_closing_the_shared_pools_leaves_nothing(tmp_path):
    dag = DAG()
    dag.node(add, dag.node(load))
    dag.run(root=str(tmp_path))
    assert [d for d in os.listdir(tmp_path) if ".pool." in d]  # the workers' spare segments
    close_shared_pools()
    assert os.listdir(tmp_path) == []


def test_bad_processes_values_are_clear_errors(tmp_path):
    dag = DAG()
    dag.node(load)
    with pytest.raises(InvalidArgumentError, match="unknown processes"):
        dag.run(root=str(tmp_path), processes="threads")
    with pytest.raises(InvalidArgumentError, match="contradicts"):
        dag.run(root=str(tmp_path), processes="node", reuse_processes=True)


def test_memory_is_measured_on_request_only(tmp_path):
    dag = DAG()
    dag.node(add, dag.node(load))
    fast = dag.run(root=str(tmp_path))
    measured = dag.run(root=str(tmp_path), measure_memory=True)
    assert "pss_bytes" not in fast.nodes["add"]
    assert measured.nodes["add"]["pss_bytes"] > 0
    assert measured.totals()["memory_peak_bytes"] > 0
    assert fast["add"].equals(measured["add"])
