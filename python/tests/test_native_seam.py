"""The Python/native seam: one registry of exception classes for every crate, one conversion of
statistics, and the output flags every CLI verb shares."""

import argparse
import pickle

import pytest

import attune
from attune import _native, errors
from attune import hash as vip
from attune import workload as wl
from attune.cli import build_parser, progress_enabled

# ---- errors -----------------------------------------------------------------------------------


def test_every_crate_raises_the_registered_classes(tmp_path):
    with pytest.raises(errors.InvalidArgumentError):
        attune.DB(str(tmp_path / "db"), no_such_option=1)
    with pytest.raises(errors.HashKeyError):
        vip.VipHashMap()[7]
    with pytest.raises(errors.HashError):
        vip.VipHashMap(learning="sometimes")
    with pytest.raises(errors.WorkloadError):
        _native.workload_keys("no-such-key-set", 10)  # raised by the bindings, not re-raised


def test_hash_and_workload_errors_are_attune_errors_and_pickle():
    for e in (errors.HashError("m"), errors.HashKeyError("7"), errors.WorkloadError("m", "p")):
        assert isinstance(e, attune.Error) and isinstance(e, ValueError)
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and str(back) == str(e) and back.path == e.path
    assert issubclass(errors.HashKeyError, KeyError)
    assert vip.HashError is errors.HashError and wl.WorkloadError is errors.WorkloadError


def test_registration_needs_every_class():
    with pytest.raises(ValueError, match="missing the class"):
        _native._register_errors(Error=errors.Error)


# ---- statistics -------------------------------------------------------------------------------


def test_stats_keep_their_established_shape(tmp_path):
    with attune.DB(str(tmp_path / "db"), memory_budget="16MiB", cache_layout="user") as db:
        for i in range(200):
            db.put(b"k%05d" % i, b"v" * 100)
        db.flush()
        db.get(b"k00001")
        s = db.stats()
        v = db.verify()
    assert "write_amplification" not in s and isinstance(s["write_amp"], float)
    assert s["learned_lookups"] == s["learned"]["learned_lookups"]
    assert 0.0 <= s["block_cache"]["hit_rate"] <= 1.0 and s["space_amp"] >= 1.0
    learned = s["learned"]
    assert "state_loaded" not in learned and learned["analyzer_state_loaded"] in (True, False)
    for key in ("hindsight_files", "hindsight_learn_ns", "hindsight_saved_ns", "files_with_models"):
        assert key in learned
    assert isinstance(learned["hindsight_frontier"], list)
    tiers = s["cache_tiers"]
    assert "compressed" not in tiers and set(tiers["compressed_cache"]) >= {"hits", "misses"}
    assert all(isinstance(p, tuple) and len(p) == 2 for p in tiers["mrc"])
    assert all(set(c) == {"app_bytes", "h_a", "h_k", "le_ns"} for c in tiers["last_round"])
    assert isinstance(s["options"], dict) and s["options"]
    assert v["files"] == v["tables"] + v["blob_segments"]
    assert v["entries"] == v["table_entries"] + v["blob_records"]


def test_vip_stats_come_through_the_same_conversion():
    m = vip.VipHashMap(learning="off")
    m.insert_many(range(100), range(100))
    m.get_many([1, 2, 3, 1000])
    s = m.stats()
    assert s["hits"] == 3 and s["misses"] == 1 and s["avg_displacement"] >= 1.0


# ---- CLI output flags -------------------------------------------------------------------------

OWNED = ("demo", "kv", "cache", "workload", "split")


def _leaf_parsers(parser: argparse.ArgumentParser, path=()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, p in subs[0].choices.items():
        yield from _leaf_parsers(p, (*path, name))


def test_every_owned_verb_has_the_shared_output_flags():
    leaves = [(p, q) for p, q in _leaf_parsers(build_parser()) if p and p[0] in OWNED]
    assert len(leaves) >= 12
    for path, parser in leaves:
        opts = {o: a for a in parser._actions for o in a.option_strings}
        assert isinstance(opts.get("--json"), argparse._StoreTrueAction), path
        assert isinstance(opts.get("--no-progress"), argparse._StoreTrueAction), path


def test_progress_is_off_under_json_or_no_progress():
    ns = argparse.Namespace
    assert progress_enabled(ns(json=True, no_progress=False)) is False
    assert progress_enabled(ns(json=False, no_progress=True)) is False
    assert progress_enabled(ns(json=False, no_progress=False)) is None  # a terminal decides
