"""VIP hashing from Python: dict agreement under random operations with learning on, error
types for bad input, learning moving a hot key to its chain head, and the PK-FK join."""

from __future__ import annotations

import argparse
import random

import pytest

import attune
from attune import _cli_hash
from attune.hash import HashError, HashKeyError, VipHashMap, hash_join


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_operations_agree_with_dict_while_learning(seed):
    print(f"seed {seed}")
    rng = random.Random(seed)
    m = VipHashMap(learning="adaptive", sense_fetches=16, learn_factor=2.0, default_factor=1)
    model: dict[int, int] = {}
    for _ in range(20_000):
        k = min(rng.randrange(2000), rng.randrange(2000))
        r = rng.random()
        if r < 0.4:
            v = rng.randrange(2**64)
            assert m.insert(k, v) == model.get(k)
            model[k] = v
        elif r < 0.6:
            assert m.remove(k) == model.pop(k, None)
        else:
            assert m.get(k) == model.get(k)
        assert len(m) == len(model)
    assert sorted(m.items()) == sorted(model.items())
    assert m.stats()["rehashes"] > 0


def test_mapping_protocol_and_missing_key_error():
    m = VipHashMap(learning="off")
    m[5] = 50
    assert 5 in m and m[5] == 50 and m.peek(5) == 50
    del m[5]
    with pytest.raises(HashKeyError):
        m[5]
    with pytest.raises(KeyError):  # HashKeyError is also a KeyError
        del m[5]


@pytest.mark.parametrize("bad", [-1, 2**64, "x", 1.5])
def test_out_of_range_keys_raise_attune_errors(bad):
    m = VipHashMap()
    with pytest.raises(attune.Error):
        m[bad] = 1
    with pytest.raises(HashError):
        m.get_many([1, bad])


def test_bad_configuration_is_a_hash_error():
    with pytest.raises(HashError):
        VipHashMap(confidence=1.5)
    with pytest.raises(HashError):
        VipHashMap(buckets=100)
    with pytest.raises(HashError):
        VipHashMap(learning="sometimes")
    with pytest.raises(HashError):
        VipHashMap(sense_fetches=-3)
    with pytest.raises(HashError):
        VipHashMap(buckets="many")


def test_get_returns_any_default_object():
    m = VipHashMap()
    marker = object()
    assert m.get(1, marker) is marker
    assert m.get(1) is None


def test_learning_moves_a_hot_key_to_its_chain_head():
    m = VipHashMap(learning=10**9, buckets=16)
    m.insert_many(list(range(24)), list(range(24)))
    # Keys inserted first sit deepest in their chains; find one behind others.
    deep = max(range(24), key=m.displacement)
    assert m.displacement(deep) > 1
    m.get_many([deep] * 50)
    assert m.displacement(deep) == 1
    assert m.stats()["swaps"] >= 1


def test_hash_join_matches_a_python_join():
    r = [3, 1, 4, 15, 9, 2, 6]
    s = [1, 1, 2, 7, 9, 9, 9, 100, 3]
    want = [(r.index(k), j) for j, k in enumerate(s) if k in r]
    assert hash_join(r, s, vip=True) == want
    assert hash_join(r, s, vip=False) == want
    with pytest.raises(HashError):
        hash_join([1, 1], [1])


def test_cli_parser_forwards_options():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    _cli_hash.add_parser(sub)
    args = parser.parse_args(
        ["hash", "--mode", "join", "--zipf", "0,2", "--ratio", "4,16", "--seed", "1,2"]
    )
    argv = _cli_hash.build_argv(args)
    assert argv[argv.index("--mode") + 1] == "join"
    assert argv[argv.index("--ratio") + 1] == "4,16"
    assert _cli_hash.expected_lines(args) == 3 * 2 * 2 * 2
    assert "--json" not in argv and "--out" not in argv


def test_cli_output_flags_are_every_verbs():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    _cli_hash.add_parser(sub)
    args = parser.parse_args(["hash", "--json", "--out", "rows.jsonl", "--no-progress"])
    argv = _cli_hash.build_argv(args)
    assert argv[argv.index("--out") + 1] == "rows.jsonl" and argv[-1] == "--json"


def test_cli_missing_binary_is_an_attune_error(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTUNE_BENCH_BIN", str(tmp_path / "nope"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(_cli_hash, "_REPO", tmp_path)
    with pytest.raises(attune.Error):
        _cli_hash.find_binary(build=False)
