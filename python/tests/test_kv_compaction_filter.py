"""`attune.DB(path, compaction_filter=f)`: a Python callable decides, during compaction, to keep,
remove or rewrite each entry; its errors keep the entry and are named in `stats()`."""

import subprocess
import sys
import textwrap

import pytest

import attune


def _fill(db, n=300):
    for i in range(n):
        db.put(b"k%04d" % i, b"v%d" % i)


def test_filter_removes_rewrites_and_keeps(tmp_path):
    seen = []

    def f(level, key, value):
        seen.append((level, key, value))
        i = int(key[1:])
        if i % 3 == 0:
            return False  # remove
        if i % 3 == 1:
            return value + b"!"  # rewrite
        return None if i % 2 else True  # keep

    with attune.DB(tmp_path / "db", compaction_filter=f) as db:
        _fill(db)
        db.compact()
        for i in range(300):
            got = db.get(b"k%04d" % i)
            if i % 3 == 0:
                assert got is None
            elif i % 3 == 1:
                assert got == b"v%d!" % i
            else:
                assert got == b"v%d" % i
        s = db.stats()["compaction_filter"]
        assert s["calls"] == 300 and s["removed"] == 100 and s["changed"] == 100
        assert s["kept"] == 100 and s["errors"] == 0 and s["last_error"] is None
    assert all(isinstance(lv, int) and type(k) is bytes for lv, k, _ in seen)
    # Removed keys stay removed across a reopen (no older version comes back).
    with attune.DB(tmp_path / "db") as db:
        assert db.get(b"k0000") is None and db.get(b"k0001") == b"v1!"


def test_str_result_is_stored_as_utf8(tmp_path):
    with attune.DB(tmp_path / "db", compaction_filter=lambda lv, k, v: "é") as db:
        db.put(b"a", b"1")
        db.compact()
        assert db.get(b"a") == "é".encode()


def test_an_exception_keeps_the_entry_and_is_named_in_stats(tmp_path):
    def f(level, key, value):
        if key == b"k0007":
            raise ValueError("boom")
        if key == b"k0008":
            return 42  # not a valid result
        return False

    with attune.DB(tmp_path / "db", compaction_filter=f) as db:
        _fill(db, 20)
        db.compact()
        assert db.get(b"k0007") == b"v7"
        assert db.get(b"k0008") == b"v8"
        assert db.get(b"k0009") is None
        s = db.stats()["compaction_filter"]
        assert s["errors"] == 2 and s["kept"] == 2 and s["removed"] == 18
        assert "compaction_filter" in s["last_error"]


def test_error_names_the_exception(tmp_path):
    def f(level, key, value):
        raise KeyError("missing")

    with attune.DB(tmp_path / "db", compaction_filter=f) as db:
        db.put(b"x", b"1")
        db.compact()
        assert db.get(b"x") == b"1"
        err = db.stats()["compaction_filter"]["last_error"]
        assert "KeyError" in err and "missing" in err and "x" in err


def test_no_filter_means_no_filter_stats(tmp_path):
    with attune.DB(tmp_path / "db") as db:
        assert "compaction_filter" not in db.stats()


@pytest.mark.parametrize("bad", [3, "not callable", b"x"])
def test_non_callable_filter_is_refused_naming_the_argument(tmp_path, bad):
    with pytest.raises(attune.InvalidArgumentError, match="compaction_filter"):
        attune.DB(tmp_path / "db", compaction_filter=bad)


def test_dropping_the_handle_during_background_compaction_does_not_deadlock(tmp_path):
    # The filter needs the GIL on a background thread; the handle is dropped (not closed) by
    # the main thread, which holds the GIL: the drop must release it while it joins that thread.
    code = textwrap.dedent(
        f"""
        import gc, time, attune
        calls = []
        def f(level, key, value):
            calls.append(key)
            time.sleep(0.0005)
            return None
        db = attune.DB({str(tmp_path / "db")!r}, compaction_filter=f,
                       write_buffer_size="64KiB", l0_compaction_trigger=2)
        for i in range(20000):
            db.put(b"k%06d" % i, b"v" * 50)
        del db
        gc.collect()
        print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "ok"
