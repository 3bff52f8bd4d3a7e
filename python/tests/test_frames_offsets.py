"""Offset-coded single-column groups: a group of one integer-valued numeric column is stored in
the fact as ``value - min`` (no dimension table, no join to decode), values come back bit-exact,
queries agree with the unsplit table, and columns that cannot be coded exactly keep their
dictionary dimension. Also: eager aggregation leaves GROUP BYs over integer dimension columns to
the join-first plan.

The property test runs derandomized (Hypothesis derives the seed from the test), so a failure
replays exactly; Hypothesis prints the falsifying table and the blob to reproduce it.
"""

import json
import math
import tempfile

import ibis
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attune.frames import SplitError, connect, read_split, split_arrow

N = 3000
SETTINGS = {
    "derandomize": True,
    "deadline": None,
    "print_blob": True,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


def bits(v, signed_zero=True):
    """A value as something that tells -0.0 from 0.0 (unless ``signed_zero`` is off: a GROUP BY
    shows either zero for the group {-0.0, 0.0}) and compares NaN equal to itself."""
    if isinstance(v, float):
        return ("float", repr(v if signed_zero or v != 0.0 else 0.0))
    return (type(v).__name__, repr(v))


def same_rows(a: pa.Table, b: pa.Table, signed_zero=True) -> bool:
    """Equal multisets of rows, exactly: every number in these tables is an integer well within
    2**53, so sums and averages do not round differently when added in another order."""

    def key(t):
        return sorted(tuple(bits(v, signed_zero) for v in r.values()) for r in t.to_pylist())

    return key(a) == key(b)


def delays(n=N):
    """A flights-like table: integer-valued float delays with NULLs and negatives (a group of
    their own), a carrier with a schedule slot determined by it (one group of two columns),
    and unique ids that stay in the fact."""
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "carrier": [f"Carrier number {i % 7}" for i in range(n)],
            "delay": pa.array(
                [None if i % 17 == 0 else float((i * 37) % 300 - 40) for i in range(n)],
                pa.float64(),
            ),
            "sched": pa.array([500 + (i % 7) * 10 for i in range(n)], pa.int32()),
        }
    )


def split(t, path, **kw):
    # Algorithm 6's groups (the dependency strategy would put carrier, sched and delay in one).
    kw.setdefault("strategy", "paper")
    kw.setdefault("narrow_keys", True)
    return split_arrow(t, path, **kw)


def test_integer_valued_float_column_is_offset_coded_without_a_dimension(tmp_path):
    t = delays()
    res = split(t, tmp_path / "s")
    assert ("delay",) in res.plan.dims, res.plan
    assert ("carrier", "sched") in res.plan.dims, res.plan
    assert list(res.offsets) == ["delay"], res.offsets
    schema = json.loads((tmp_path / "s" / "schema.json").read_text())
    assert schema["version"] == 2
    assert schema["fact"]["offsets"]["delay"] == {"offset": -40, "stored_type": "SMALLINT"}
    assert [d["columns"] for d in schema["dims"]] == [["carrier", "sched"]]
    stored = pq.read_table(tmp_path / "s" / "fact.parquet", columns=["delay"])
    assert stored.schema.field("delay").type == pa.int16()
    assert stored.column(0).null_count == t.column("delay").null_count
    back = read_split(tmp_path / "s")
    assert back.schema == t.schema
    assert same_rows(back, t)


def late_count(x):
    late = x.filter(x.delay > 60)
    return late.agg(n=late.count(), m=late.sched.max())


def test_aggregates_of_an_offset_column_need_no_join(tmp_path):
    t = delays()
    split(t, tmp_path / "s")
    pq.write_table(t, tmp_path / "orig.parquet")
    con = ibis.duckdb.connect()
    orig = con.read_parquet(tmp_path / "orig.parquet", table_name="orig")
    sf = connect(tmp_path / "s", con=con, name="f")
    for make in (
        lambda x: x.agg(s=x.delay.sum(), a=x.delay.mean(), lo=x.delay.min(), n=x.delay.count()),
        late_count,
        lambda x: x.group_by("carrier").agg(a=x.delay.mean(), s=x.sched.sum()),
    ):
        want = make(orig).to_pyarrow()
        got = sf.to_pyarrow(make(sf.table))
        assert got.schema == want.schema
        assert same_rows(got, want), (sf.last_rewrite, got, want)
    sql = sf.sql(sf.table.agg(a=sf.table.delay.mean(), s=sf.table.id.sum()))
    assert "dim_" not in sql, sql


@pytest.mark.parametrize(
    "values",
    [
        [-0.0, 1.0, 2.0],  # -0.0 would come back as 0.0
        [0.5, 1.0, 2.0],  # not an integer
        [math.nan, 1.0, 2.0],
        [math.inf, 1.0, 2.0],
        [0.0, 1e6, 2.0],  # range wider than the 1-byte dense key
    ],
)
def test_values_that_cannot_be_offset_coded_keep_a_dictionary(tmp_path, values):
    t = pa.table(
        {
            "x": pa.array([values[i % 3] for i in range(N)], pa.float64()),
            "id": pa.array(range(N), pa.int64()),
        }
    )
    res = split(t, tmp_path / "s")
    assert ("x",) in res.plan.dims, res.plan
    assert "x" not in res.offsets
    assert same_rows(read_split(tmp_path / "s"), t)


def test_duckdb_storage_with_offset_columns_round_trips(tmp_path):
    t = delays()
    res = split(t, tmp_path / "s", storage="duckdb")
    assert res.offsets
    assert same_rows(read_split(tmp_path / "s"), t)
    sf = connect(tmp_path / "s", name="f")
    assert sf.execute(sf.table.delay.max()) == 259.0


def test_schema_with_offsets_must_say_version_2_and_a_valid_code(tmp_path):
    split(delays(), tmp_path / "s")
    f = tmp_path / "s" / "schema.json"
    good = json.loads(f.read_text())
    for change, msg in (
        (lambda s: s.update(version=1), "need version 2"),
        (lambda s: s["fact"]["offsets"]["delay"].update(stored_type="TEXT"), "bad offset"),
        (lambda s: s["fact"]["offsets"]["delay"].update(offset="x"), "bad offset"),
        (lambda s: s["fact"]["offsets"].update(carrier=s["fact"]["offsets"]["delay"]), "not a"),
        (lambda s: s.update(version=3), "not supported"),
    ):
        bad = json.loads(json.dumps(good))
        change(bad)
        f.write_text(json.dumps(bad))
        with pytest.raises(SplitError, match=msg):
            read_split(tmp_path / "s")


def test_group_by_integer_dimension_columns_joins_first(tmp_path):
    # year/month-like integers with a text column in one dimension (4 x 12 x 7 combinations).
    n = 6000
    t = pa.table(
        {
            "year": pa.array([2013 + i % 4 for i in range(n)], pa.int64()),
            "month": pa.array([1 + (i // 4) % 12 for i in range(n)], pa.int64()),
            "origin": [f"Airport number {i % 7}" for i in range(n)],
            "v": pa.array(range(n), pa.int64()),
        }
    )
    split_arrow(t, tmp_path / "s")
    sf = connect(tmp_path / "s", name="f")
    sf.eager_max_fraction = 1e18  # the size rule would push; the type rule must not
    x = sf.table
    sf.sql(x.group_by("year", "month").agg(s=x.v.sum()))
    assert sf.last_rewrite["eager"] == [], sf.last_rewrite
    sf.sql(x.group_by("origin").agg(s=x.v.sum()))  # text: pushed
    assert sf.last_rewrite["eager"], sf.last_rewrite
    sf.sql(x.group_by("origin", "month").agg(s=x.v.sum()))  # any text item: pushed
    assert sf.last_rewrite["eager"], sf.last_rewrite


# Column kinds and the values they can hold; a column draws a spread (values within
# [shift - spread, shift + spread], so its range needs 1, 2, 4 or 8 key bytes) and a shift.
KINDS = {
    "i8": pa.int8(),
    "i32": pa.int32(),
    "i64": pa.int64(),
    "u16": pa.uint16(),
    "u32": pa.uint32(),
    "f32": pa.float32(),
    "f64": pa.float64(),
}
LIMITS = {
    "i8": (-(2**7), 2**7 - 1),
    "i32": (-(2**31), 2**31 - 1),
    "i64": (-(2**63), 2**63 - 1),
    "u16": (0, 2**16 - 1),
    "u32": (0, 2**32 - 1),
    "f32": (-(2**53), 2**53),
    "f64": (-(2**53), 2**53),
}
SPREADS = [3, 3, 50, 50, 60, 100, 30000, 2**40]
# Values that block offset coding of a float column (None: no blocker in this column).
BLOCKERS = [None, None, None, -0.0, 0.5, math.nan, math.inf]


@st.composite
def numeric_tables(draw):
    ncols = draw(st.integers(1, 3))
    kinds = [draw(st.sampled_from(sorted(KINDS))) for _ in range(ncols)]
    nrows = draw(st.integers(20, 300))
    cols = {}
    for j, k in enumerate(kinds):
        lo, hi = LIMITS[k]
        spread = draw(st.sampled_from(SPREADS))
        shift = draw(st.integers(lo, hi))
        vals = st.integers(max(lo, shift - spread), min(hi, shift + spread))
        # 12 to 30 values: enough that two columns rarely pay as one group, so that
        # most groups have a single column (the ones offset coding is for).
        base = draw(st.lists(st.one_of(st.none(), vals), min_size=12, max_size=30))
        if k.startswith("f"):
            base = [None if v is None else float(v) for v in base]
            blocker = draw(st.sampled_from(BLOCKERS))
            if blocker is not None:
                base.append(blocker)
        picks = draw(st.lists(st.integers(0, len(base) - 1), min_size=nrows, max_size=nrows))
        cols[f"c{j}_{k}"] = pa.array([base[p] for p in picks], type=KINDS[k])
    return pa.table(cols)


@settings(max_examples=25, **SETTINGS)
@given(t=numeric_tables(), narrow=st.booleans())
def test_offset_coded_splits_round_trip_and_answer_like_the_unsplit_table(t, narrow):
    with tempfile.TemporaryDirectory() as d:
        try:
            res = split_arrow(t, d + "/s", narrow_keys=narrow)
        except SplitError as exc:
            assert "refusing" in str(exc), str(exc)
            return
        back = read_split(d + "/s")
        assert back.schema == t.schema
        assert same_rows(back, t)
        assert res.split_logical_bytes < res.input_logical_bytes
        pq.write_table(t, d + "/orig.parquet")
        con = ibis.duckdb.connect()
        orig = con.read_parquet(d + "/orig.parquet", table_name="orig")
        sf = connect(d + "/s", con=con, name="split")
        first = t.column_names[0]
        for c in t.column_names:
            for make in (
                lambda x, c=c: x.group_by(first).agg(
                    lo=x[c].min(), hi=x[c].max(), n=x[c].count(), all_=x.count()
                ),
                lambda x, c=c: x.group_by(c).agg(n=x.count()),
                lambda x, c=c: x.filter(x[c] > 0).select(*dict.fromkeys([c, first])),
            ):
                want = make(orig).to_pyarrow()
                got = sf.to_pyarrow(make(sf.table))
                assert got.schema == want.schema
                assert same_rows(got, want, signed_zero=False), (c, sf.last_rewrite, got, want)
