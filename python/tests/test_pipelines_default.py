"""How ``DAG.run()`` gets its processes: by default workers forked for the run (they see the
driver's code and module state as the run starts); the process's shared worker pool (started by
the first run that asks for it, kept for the next) and a fork per node on request; failures fail
the run and leave no run files."""

from __future__ import annotations

import importlib
import os
import sys
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
    return [
        d
        for d in os.listdir(root)
        if d.startswith("attune-dag.") and ".pool." not in d and not d.endswith(".recycle")
    ]


def test_shared_runs_use_the_same_workers(tmp_path):
    dag = DAG()
    dag.node(pid, dag.node(load))
    first = dag.run(root=str(tmp_path), processes="shared")
    second = dag.run(root=str(tmp_path), processes="shared")
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
    shared = dag.run(root=str(tmp_path), processes="shared")
    per_node = dag.run(root=str(tmp_path), processes="node")
    default = dag.run(root=str(tmp_path))
    assert per_node.processes == "node" and not per_node.reuse_processes
    assert default.processes == "run" and shared.processes == "shared"
    inline = dag.run_inline()["add"]
    for r in (shared, per_node, default):
        assert r["add"].equals(inline)
    assert run_dirs(tmp_path) == []


def test_functions_made_after_the_workers_started_reach_them(tmp_path):
    warm = DAG()
    warm.node(load)
    warm.run(root=str(tmp_path), processes="shared")  # the shared workers start here
    k = 5

    dag = DAG()
    dag.node(lambda t: t.append_column("k", pc.add(t["a"], k)), dag.node(load), name="late")
    out = dag.run(root=str(tmp_path), processes="shared")
    assert out.processes == "shared"
    assert out["late"]["k"].to_pylist()[:2] == [5, 6]


def test_a_function_that_cannot_be_pickled_runs_in_workers_of_its_run(tmp_path):
    lock = threading.Lock()

    def locked(t: pa.Table) -> pa.Table:
        with lock:
            return add(t)

    dag = DAG()
    dag.node(locked, dag.node(load), name="locked")
    out = dag.run(root=str(tmp_path), processes="shared")
    assert out.processes == "run"
    assert out["locked"].equals(add(load()))
    assert run_dirs(tmp_path) == []


def test_a_failing_node_fails_the_run_and_the_pool_goes_on(tmp_path):
    dag = DAG()
    dag.node(boom, dag.node(load), name="boom")
    with pytest.raises(NodeFailedError) as e:
        dag.run(root=str(tmp_path), processes="shared")
    assert e.value.node == "boom" and e.value.reason == "exception"
    assert run_dirs(tmp_path) == []
    ok = DAG()
    ok.node(add, ok.node(load))
    assert ok.run(root=str(tmp_path), processes="shared")["add"].num_rows == 10_000


def test_closing_the_shared_pools_leaves_nothing(tmp_path):
    dag = DAG()
    dag.node(add, dag.node(load))
    dag.run(root=str(tmp_path), processes="shared")
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


def test_the_default_sees_a_module_reloaded_or_changed_after_a_run(tmp_path):
    # A notebook user edits and reloads a module between runs: the default's workers, forked
    # for each run, run the driver's code as it is then, as calling the functions would.
    src = tmp_path / "mods"
    src.mkdir()
    (src / "kelvin_reload_mod.py").write_text(
        "import pyarrow as pa\nK = 1\ndef f(t):\n    return pa.table({'v': [2 * K]})\n"
    )
    sys.path.insert(0, str(src))
    try:
        mod = importlib.import_module("kelvin_reload_mod")
        dag = DAG()
        dag.node(mod.f, dag.node(load), name="f")
        assert dag.run(root=str(tmp_path))["f"]["v"].to_pylist() == [2]
        mod.K = 10
        assert dag.run(root=str(tmp_path))["f"]["v"].to_pylist() == [20]
        (src / "kelvin_reload_mod.py").write_text(
            "import pyarrow as pa\nK = 1\ndef f(t):\n    return pa.table({'v': [1000 * K]})\n"
        )
        importlib.invalidate_caches()
        mod = importlib.reload(mod)
        dag = DAG()
        dag.node(mod.f, dag.node(load), name="f")
        assert dag.run(root=str(tmp_path))["f"]["v"].to_pylist() == [1000]
    finally:
        sys.path.remove(str(src))
        sys.modules.pop("kelvin_reload_mod", None)
