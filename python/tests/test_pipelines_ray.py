"""The same DAG definitions run on Ray's object store unchanged (``DAG.run(mode="ray")``).

Skipped only when Ray (the ``ray`` extra) is not installed."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from attune.pipelines import DAG, NodeFailedError

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def ray_session():
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "120")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    if started:
        ray.shutdown()


def _dag() -> tuple[DAG, object]:
    # Lambdas: Ray pickles them by value (a function of this test module would be pickled by
    # reference, and Ray's workers do not import the test module).
    dag = DAG()
    src = dag.node(
        lambda: pa.table({"x": pa.array(range(20_000)), "s": pa.array(["a", "b"] * 10_000)}),
        name="load",
    )
    a = dag.node(lambda t: t.append_column("y", pc.multiply(t["x"], 3)), src, name="triple")
    b = dag.node(lambda t: t.filter(pc.greater(t["x"], 15_000)), src, name="big")
    j = dag.node(lambda x, y: x.join(y.select(["x"]), "x").sort_by("x"), a, b, name="join")
    return dag, j


def test_one_dag_on_processes_and_on_ray(ray_session, tmp_path):
    dag, _ = _dag()
    on_ray = dag.run(mode="ray")
    on_processes = dag.run(root=str(tmp_path))
    assert on_ray.mode == "ray" and on_processes.mode == "process"
    assert on_ray["join"].equals(on_processes["join"])
    assert on_ray["join"].equals(dag.run_inline()["join"])
    assert set(on_ray.nodes) == {"load", "triple", "big", "join"}


def test_a_failing_node_on_ray_names_itself(ray_session):
    dag, j = _dag()
    dag.node(lambda t: t.column("no such column"), j, name="bad")
    with pytest.raises(NodeFailedError, match="node bad raised KeyError.*no such column") as e:
        dag.run(mode="ray")
    assert e.value.node == "bad" and e.value.reason == "exception"


def test_a_non_table_on_ray(ray_session):
    dag, j = _dag()
    dag.node(lambda t: t.num_rows, j, name="count")
    with pytest.raises(NodeFailedError, match="node count returned builtins.int") as e:
        dag.run(mode="ray")
    assert e.value.reason == "not-a-table"


def test_a_node_with_an_arena_on_ray(ray_session):
    import numpy as np

    def produce(t, ctx):
        out = ctx.arena.empty(t.num_rows, np.int64)
        np.multiply(t["x"].to_numpy(), 2, out=out)
        return t.append_column("x2", pa.array(out))

    dag, j = _dag()
    dag.node(produce, j, ctx=True, name="produce")
    assert dag.run(mode="ray")["produce"].equals(dag.run_inline()["produce"])
