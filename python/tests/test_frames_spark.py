"""The same SplitDF code on Ibis's PySpark backend (local mode) gives the DuckDB results.

Marked ``spark``: tiny data and one SparkSession for the whole test run (start-up is ~5 s).
"""

import shutil

import pyarrow as pa
import pytest

pytestmark = pytest.mark.spark


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("no java on PATH")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[1]")
        .appName("attune-frames-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def suite(t):
    m = t.mutate(hi=t.severity >= 3)
    return {
        "count": t.count(),
        "by_state": t.group_by("state").agg(n=t.count(), sev=t.severity.sum()),
        # Eager aggregation on both backends: pre-aggregate on keys, weigh dimension columns.
        "eager": t.group_by("state", "timezone").agg(
            avg=t.severity.mean(), c=t.city.count(), lo=t.city.min(), n=t.count()
        ),
        "filter_project": t.filter(t.weather == "Light Rain").select("id", "city"),
        "feature": m.group_by("hi", "timezone").agg(n=m.count()),
        "distinct": t.select("county", "timezone").distinct(),
        "self_join": t.select("id", "state").join(t.select("id", "weather"), "id"),
        "all": t,
    }


def canon(tbl: pa.Table):
    return sorted(repr(tuple(r.values())) for r in tbl.to_pylist())


def test_same_splitdf_code_on_duckdb_and_pyspark(tmp_path, spark):
    from attune import frames

    n = 400
    states = ["California", "Texas", "Florida"]
    t = pa.table(
        {
            "id": list(range(n)),
            "state": [states[i % 3] for i in range(n)],
            "county": [f"{states[i % 3]} County {i % 5}" for i in range(n)],
            "city": [None if i % 11 == 0 else f"{states[i % 3]} City {i % 4}" for i in range(n)],
            "timezone": ["US/Pacific" if i % 3 == 0 else "US/Eastern" for i in range(n)],
            "weather": [["Clear", "Light Rain", "Overcast Skies"][i % 3] for i in range(n)],
            "severity": [i % 4 + 1 for i in range(n)],
        }
    )
    res = frames.split_arrow(t, tmp_path / "s", name="acc")
    assert res.plan.dims
    duck = frames.connect(tmp_path / "s")
    spk = frames.connect(tmp_path / "s", backend="pyspark", session=spark)
    want, got = suite(duck.table), suite(spk.table)
    for name in want:
        if name == "count":
            assert duck.execute(want[name]) == spk.execute(got[name]) == n
            continue
        a, b = duck.to_pyarrow(want[name]), spk.to_pyarrow(got[name])
        assert spk.last_rewrite.get("rewritten"), (name, spk.last_rewrite)
        if name == "eager":
            assert spk.last_rewrite["eager"], spk.last_rewrite
        assert a.column_names == b.column_names, name
        assert canon(a) == canon(b), name


def test_offset_coded_columns_decode_the_same_on_pyspark(tmp_path, spark):
    from attune import frames

    n = 600
    t = pa.table(
        {
            "id": list(range(n)),
            "carrier": [f"Carrier number {i % 5}" for i in range(n)],
            "delay": pa.array(
                [None if i % 13 == 0 else float((i * 37) % 150 - 40) for i in range(n)],
                pa.float64(),
            ),
        }
    )
    res = frames.split_arrow(t, tmp_path / "s", name="fl", narrow_keys=True)
    assert "delay" in res.offsets, res
    duck = frames.connect(tmp_path / "s")
    spk = frames.connect(tmp_path / "s", backend="pyspark", session=spark)
    for make in (
        lambda x: x.group_by("carrier").agg(a=x.delay.mean(), lo=x.delay.min(), n=x.count()),
        lambda x: x.filter(x.delay > 60).select("id", "delay"),
        lambda x: x,
    ):
        a, b = duck.to_pyarrow(make(duck.table)), spk.to_pyarrow(make(spk.table))
        assert spk.last_rewrite.get("rewritten"), spk.last_rewrite
        assert canon(a) == canon(b)
