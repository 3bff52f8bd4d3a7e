"""attune.workload: determinism by seed, shapes of key sets and streams, errors for bad input."""

import json
from collections import Counter

import pytest

import attune
from attune import workload as wl


def test_keys_are_sorted_unique_and_deterministic():
    for name in ["linear", "seg1", "seg10", "normal", "lognormal", "uniform-sparse", "osm"]:
        a = wl.keys(name, 5000, seed=3)
        assert a == sorted(set(a)), name
        assert a == wl.keys(name, 5000, seed=3), name
    assert wl.keys("normal", 100, seed=1) != wl.keys("normal", 100, seed=2)


def test_seg1_has_a_gap_after_every_100_keys():
    k = wl.keys("seg1", 1000)
    gaps = [i for i in range(1, 1000) if k[i] - k[i - 1] > 1]
    assert gaps == list(range(100, 1000, 100))


def test_random_order_is_a_permutation_and_chunks_agree():
    full = wl.keys("seg10", 10_007, seed=1, order="random:9")
    assert sorted(full) == wl.keys("seg10", 10_007, seed=1)
    chunked = list(wl.iter_keys("seg10", 10_007, seed=1, order="random:9", chunk=1000))
    assert chunked == full


def test_bytes_keys_preserve_order():
    b = wl.keys("uniform-sparse", 1000, seed=5, as_bytes=True)
    assert all(len(x) == 16 and x[8:] == bytes(8) for x in b)
    assert b == sorted(b)
    ints = wl.keys("uniform-sparse", 1000, seed=5)
    assert [int.from_bytes(x[:8], "big") for x in b] == ints


def test_requests_are_deterministic_and_skewed():
    seed = 7
    print("seed", seed)
    a = wl.requests("zipfian:0.99", 1000, 50_000, seed)
    assert a == wl.requests("zipfian:0.99", 1000, 50_000, seed)
    assert a != wl.requests("zipfian:0.99", 1000, 50_000, seed + 1)
    c = Counter(a)
    assert c.most_common(1)[0][0] == 0
    assert list(wl.iter_requests("zipfian:0.99", 1000, 50_000, seed, chunk=333)) == a
    hot = sum(1 for x in wl.requests("hotspot:0.2:0.8", 1000, 50_000, seed) if x < 200)
    assert abs(hot / 50_000 - 0.8) < 0.02


def test_ycsb_mix_and_determinism():
    ops = list(wl.ycsb("a", 1000, 20_000, seed=4))
    assert ops == list(wl.ycsb("a", 1000, 20_000, seed=4))
    assert ops != list(wl.ycsb("a", 1000, 20_000, seed=5))
    kinds = Counter(op for op, _, _ in ops)
    assert abs(kinds["read"] / 20_000 - 0.5) < 0.02
    assert abs(kinds["update"] / 20_000 - 0.5) < 0.02
    assert all(n == 100 for op, _, n in ops if op == "update")
    load = list(wl.ycsb("e", 500, 0, phase="load"))
    assert len(load) == 500 and all(op == "insert" and n == 1000 for op, _, n in load)
    scans = [n for op, _, n in wl.ycsb("e", 500, 5000, seed=1) if op == "scan"]
    assert min(scans) >= 1 and max(scans) <= 100


def test_wiscer_stream_is_deterministic():
    a = list(wl.wiscer(1.0, 1000, 2000, seed=3, fetch=0.9, insert=0.05, delete=0.05))
    assert a == list(wl.wiscer(1.0, 1000, 2000, seed=3, fetch=0.9, insert=0.05, delete=0.05))
    assert {op for op, _, _ in a} == {"read", "insert", "delete"}
    loaded = {key for _, key, _ in wl.wiscer(1.0, 1000, 0, seed=3, phase="load")}
    assert len(loaded) == 1000
    fetched = {key for op, key, _ in wl.wiscer(1.0, 1000, 2000, seed=3) if op == "read"}
    assert fetched <= loaded


@pytest.mark.parametrize(
    "call",
    [
        lambda: wl.keys("zebra", 10),
        lambda: wl.keys("linear", 0),
        lambda: wl.keys("linear", -1),
        lambda: wl.requests("zipfian:-1", 10, 10),
        lambda: wl.requests("hotspot:0.2", 10, 10),
        lambda: wl.ycsb("g", 10, 10),
        lambda: wl.ycsb("a", 0, 10),
        lambda: wl.ycsb("a", 10, 10, phase="warmup"),
        lambda: wl.wiscer(1.0, 10, 10, fetch=0.5),
        lambda: wl.iter_keys("nope", 10),
    ],
)
def test_bad_input_raises_workload_error(call):
    with pytest.raises(wl.WorkloadError) as info:
        call()
    assert isinstance(info.value, attune.Error)


def test_unknown_name_error_lists_valid_names():
    with pytest.raises(wl.WorkloadError, match="zipfian"):
        wl.requests("pareto", 10, 10)


def test_trace_round_trip_binary_and_csv(tmp_path):
    for fmt in ["bin", "csv"]:
        path = tmp_path / f"t.{fmt}"
        wl.write_trace(path, ["seq:8", "random"], 10_000, seed=2, fmt=fmt, write_fraction=0.25)
        recs = list(wl.read_trace(path, chunk=3000))
        assert len(recs) == 10_000
        ts = [r[0] for r in recs]
        assert ts == sorted(ts)
        writes = sum(1 for r in recs if r[3] == "W")
        assert abs(writes / 10_000 - 0.25) < 0.03
    a = list(wl.read_trace(tmp_path / "t.bin"))
    b = list(wl.read_trace(tmp_path / "t.csv"))
    assert a == b


def test_corrupt_and_truncated_traces_raise_with_offset(tmp_path):
    path = tmp_path / "t.bin"
    wl.write_trace(path, ["random"], 5000, seed=1)
    data = path.read_bytes()
    (tmp_path / "cut.bin").write_bytes(data[:-7])
    with pytest.raises(wl.WorkloadError, match="truncated"):
        list(wl.read_trace(tmp_path / "cut.bin"))
    flipped = bytearray(data)
    flipped[100] ^= 0xFF
    (tmp_path / "flip.bin").write_bytes(bytes(flipped))
    with pytest.raises(wl.WorkloadError, match="byte 20"):
        list(wl.read_trace(tmp_path / "flip.bin"))
    (tmp_path / "bad.csv").write_text("timestamp_ns,offset,size,op,latency_ns\n1,2,3,X,4\n")
    with pytest.raises(wl.WorkloadError, match="line 2"):
        list(wl.read_trace(tmp_path / "bad.csv"))
    with pytest.raises(wl.WorkloadError, match="cannot open"):
        wl.read_trace(tmp_path / "missing.bin")
    with pytest.raises(wl.WorkloadError):
        wl.write_trace(tmp_path / "x.bin", ["zigzag"], 10)


def test_cli_workload_verbs(tmp_path, capsys):
    from attune.cli import main

    assert main(["workload", "keys", "seg10", "25"]) == 0
    lines = capsys.readouterr().out.split()
    assert [int(x) for x in lines] == wl.keys("seg10", 25)
    assert main(["workload", "ycsb", "b", "1000", "20000", "--json", "--seed", "3"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert abs(summary["mix"]["read"] - 0.95) < 0.01
    out = tmp_path / "t.csv"
    assert (
        main(["workload", "trace", "seq", "--count", "50", "--fmt", "csv", "--out", str(out)]) == 0
    )
    assert len(list(wl.read_trace(out))) == 50
    capsys.readouterr()
    assert main(["workload", "requests", "zipfian:-2", "10", "10"]) == 1
    assert "theta" in capsys.readouterr().err


def test_mixgraph_hot_range_and_determinism():
    ops = list(wl.mixgraph(3_000_000, 30_000, seed=2))
    assert ops == list(wl.mixgraph(3_000_000, 30_000, seed=2))
    per_range = Counter(key // 100_000 for _, key, _ in ops)
    assert per_range.most_common(1)[0][1] / 30_000 > 0.7
    kinds = Counter(op for op, _, _ in ops)
    assert abs(kinds["read"] / 30_000 - 0.85) < 0.02
    with pytest.raises(wl.WorkloadError):
        wl.mixgraph(1000, 10, mix=(0.5, 0.1, 0.1))
