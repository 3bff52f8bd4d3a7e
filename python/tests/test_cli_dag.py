"""`attune dag run|stats|clean` and `attune bench dag` through the CLI."""

from __future__ import annotations

import json
import os

import pytest

from attune.cli import main

DAG_MODULE = """
import pyarrow as pa
import pyarrow.compute as pc
from attune.pipelines import DAG

def load():
    return pa.table({"x": list(range(1000))})

def double(t):
    return t.append_column("y", pc.multiply(t["x"], 2))

dag = DAG()
dag.node(double, dag.node(load))
"""


@pytest.fixture
def module(tmp_path):
    path = tmp_path / "my_dag.py"
    path.write_text(DAG_MODULE)
    return path


def test_run_prints_every_node(module, tmp_path, capsys):
    assert main(["dag", "run", str(module), "--root", str(tmp_path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "load" in out and "double" in out and "output double: 1000 rows, 2 columns" in out


def test_run_with_reused_processes(module, tmp_path, capsys):
    argv = ["dag", "run", str(module), "--root", str(tmp_path), "--json", "--reuse-processes"]
    assert main([*argv, "--parallel", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["reuse_processes"] and doc["outputs"] == {"double": {"rows": 1000, "columns": 2}}
    assert doc["nodes"]["load"]["pid"] == doc["nodes"]["double"]["pid"]


@pytest.mark.parametrize("processes", ["shared", "run", "node"])
def test_run_with_each_kind_of_process(module, tmp_path, capsys, processes):
    argv = ["dag", "run", str(module), "--root", str(tmp_path), "--json"]
    assert main([*argv, "--processes", processes, "--parallel", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["processes"] == processes
    assert doc["outputs"] == {"double": {"rows": 1000, "columns": 2}}
    same = doc["nodes"]["load"]["pid"] == doc["nodes"]["double"]["pid"]
    assert same == (processes != "node")


def test_run_json_under_spawn(module, tmp_path, capsys):
    # spawn starts a fresh interpreter per node (seconds each here): the one spawn test of the
    # pipelines; it also checks that spawned nodes import the DAG module's functions.
    argv = [
        "dag",
        "run",
        str(module),
        "--root",
        str(tmp_path),
        "--json",
        "--start-method",
        "spawn",
    ]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["start_method"] == "spawn"
    assert doc["outputs"] == {"double": {"rows": 1000, "columns": 2}}
    assert doc["nodes"]["double"]["bytes_reshared"] > 0


def test_a_module_without_a_dag_is_a_clean_error(tmp_path, capsys):
    bad = tmp_path / "nothing.py"
    bad.write_text("x = 1\n")
    assert main(["dag", "run", str(bad), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["error"] == "PipelineError" and "neither `dag`" in doc["message"]


def test_a_failing_node_is_a_clean_error(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text(DAG_MODULE + "\ndag.node(lambda t: 42, dag.nodes[1], name='oops')\n")
    assert main(["dag", "run", str(bad), "--root", str(tmp_path), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "node oops returned builtins.int, not a pyarrow.Table" in err
    assert not [
        d for d in os.listdir(tmp_path) if d.startswith("attune-dag.") and ".pool." not in d
    ]


def test_a_raising_node_shows_its_traceback_and_json_names_it(tmp_path, capsys):
    bad = tmp_path / "raises.py"
    bad.write_text(
        DAG_MODULE + "\ndef divider(t):\n    return 1 / 0\n\ndag.node(divider, dag.nodes[1])\n"
    )
    argv = ["dag", "run", str(bad), "--root", str(tmp_path), "--no-progress"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "raises.py" in err and "1 / 0" in err, err
    assert err.rstrip().endswith(
        "attune: error: node divider raised ZeroDivisionError: division by zero "
        "(at raises.py:16, in divider)"
    )
    assert main([*argv, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert (doc["error"], doc["node"], doc["reason"]) == ("NodeFailedError", "divider", "exception")
    assert "1 / 0" in doc["detail"]


def test_stats_and_clean_find_a_dead_drivers_directory(tmp_path, capsys):
    stale = tmp_path / "attune-dag.999999999.dag.abc"
    stale.mkdir()
    (stale / "t.c0").write_bytes(b"x" * 4096)
    assert main(["dag", "stats", "--root", str(tmp_path), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [(r["pid"], r["alive"]) for r in runs] == [(999999999, False)]
    assert main(["dag", "clean", "--root", str(tmp_path), "--evict", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["removed_runs"] == [str(stale)]
    assert not stale.exists()


def test_stats_says_whether_the_root_gives_huge_pages(tmp_path, capsys):
    from attune.pipelines.dag import root_pages

    mounts = tmp_path / "mounts"
    mounts.write_text(
        "/dev/vda / ext4 rw,relatime 0 0\n"
        "tmpfs /dev/shm tmpfs rw,relatime,size=1024k 0 0\n"
        "tmpfs /mnt/huge\\040shm tmpfs rw,relatime,huge=within_size 0 0\n"
    )
    pages = {p: root_pages(p, str(mounts)) for p in ["/dev/shm/x", "/mnt/huge shm", "/var/tmp"]}
    assert pages["/dev/shm/x"]["mount"] == "/dev/shm"
    assert (pages["/dev/shm/x"]["fstype"], pages["/dev/shm/x"]["huge"]) == ("tmpfs", "never")
    assert pages["/mnt/huge shm"]["huge"] == "within_size"
    assert (pages["/var/tmp"]["mount"], pages["/var/tmp"]["huge"]) == ("/", "n/a")
    assert main(["dag", "stats", "--root", str(tmp_path), "--json"]) == 0
    root = json.loads(capsys.readouterr().out)["root"]
    assert root["path"] == os.path.realpath(tmp_path) and root["huge"]
    assert main(["dag", "stats", "--root", str(tmp_path)]) == 0
    assert "huge pages: " in capsys.readouterr().out


def test_bench_dag_writes_rows_with_the_command(tmp_path):
    out = tmp_path / "rows.jsonl"
    argv = [
        "bench",
        "dag",
        "chain",
        "--column-mib",
        "1",
        "--length",
        "3",
        "--transports",
        "sipc,ipc-mmap",
        "--sipc-variants",
        "pool",
        "--root",
        str(tmp_path),
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    chain = {r["engine"]: r for r in rows if r["kind"] == "chain"}
    assert set(chain) == {"sipc", "ipc-mmap"}
    assert chain["sipc"]["bytes_copied_after_load"] < chain["ipc-mmap"]["bytes_copied_after_load"]
    assert rows[0]["command"].startswith("attune bench dag chain --column-mib 1")
    (summary,) = [r for r in rows if r["kind"] == "summary" and r["case"] == "chain"]
    assert summary["speedup_vs_ipc_mmap"] > 0


def test_bench_dag_eviction_evicts_under_a_small_budget(tmp_path):
    out = tmp_path / "rows.jsonl"
    argv = ["bench", "dag", "eviction", "--trees", "2", "--depth", "3", "--column-mib", "1"]
    argv += ["--work", "1", "--budget-fraction", "0.1", "--policies", "off,limit-drop"]
    argv += ["--root", str(tmp_path), "--spill-dir", str(tmp_path), "--out", str(out)]
    assert main(argv) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    by = {r["engine"]: r for r in rows if r["kind"] == "eviction"}
    assert by["off"]["limit_drops"] == 0 and by["limit-drop"]["limit_drops"] > 0
    (summary,) = [r for r in rows if r["kind"] == "summary"]
    assert summary["off_seconds"] > 0 and summary["limit_drop_seconds"] > 0


def test_bench_dag_resharing_splits_compute_into_the_op_and_its_fresh_pages(tmp_path):
    """The resharing benchmark measures where a node's compute goes: its CPU seconds per engine
    (a ratio in the summary) and the op's CPU with warm memory against fresh shared pages."""
    out = tmp_path / "rows.jsonl"
    argv = ["bench", "dag", "resharing", "--ops", "filter", "--string-rows", "20000"]
    argv += ["--repeat", "1", "--transports", "sipc", "--sipc-variants", "pool,copy,shared-seg"]
    argv += ["--root", str(tmp_path), "--out", str(out)]
    assert main(argv) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    runs = [r for r in rows if r["kind"] == "resharing"]
    assert {r["engine"] for r in runs} == {"sipc", "sipc:copy", "sipc:shared-seg"}
    assert all(r["compute_cpu_seconds"] > 0 for r in runs)
    (summary,) = [r for r in rows if r["kind"] == "summary"]
    assert summary["compute_cpu_ratio_vs_sipc_copy"] > 0
    assert summary["compute_cpu_ratio_vs_sipc_shared_seg"] > 0
    (cost,) = [r for r in rows if r["kind"] == "page-cost"]
    assert cost["op"] == "filter" and cost["warm_cpu_ms"] > 0 and cost["warm_shm_cpu_ms"] > 0
    # Every page of the output (half of 20,000 rows of two 100-byte strings) is a new one; the
    # second call into the same pool reuses the first call's blocks, pages and all.
    assert cost["fresh_shm_page_faults"] >= 10_000 * 200 // 4096
    assert cost["warm_shm_page_faults"] < cost["fresh_shm_page_faults"] // 4
    assert [f for f in os.listdir(tmp_path) if f != "rows.jsonl"] == []
