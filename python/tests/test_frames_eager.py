"""Eager aggregation in SplitDF: group-bys on dimension columns aggregate on the fact's keys first
and join the dimensions afterwards; results equal those on the unsplit table, NULLs and
duplicates included, and shapes that cannot be pushed fall back to join-then-aggregate."""

import ibis
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from attune.frames import connect, eager, split_arrow

N = 4000


def table():
    """state -> timezone (a dimension), city with NULLs (a dimension), unique ids (the fact)."""
    states = ["California State", "Texas State", None, "Florida State"]
    return pa.table(
        {
            "id": list(range(N)),
            "state": [states[i % 4] for i in range(N)],
            "tz": [None if i % 4 == 2 else f"US/Zone-{i % 4 % 3}" for i in range(N)],
            "city": [None if i % 9 == 0 else f"A long city name {i % 5}" for i in range(N)],
            "sev": [None if i % 13 == 0 else (i * 7919) % 1000 - 500 for i in range(N)],
            "rank": [None if i % 11 == 0 else (i % 3) * 10 for i in range(N)],
        }
    )


@pytest.fixture()
def frames(tmp_path):
    t = table()
    # Algorithm 6 with 8-byte keys: the integers stay in the fact
    res = split_arrow(t, tmp_path / "s", strategy="paper")
    assert res.plan.dims and {"id", "sev", "rank"} <= set(res.plan.fact), res.plan
    pq.write_table(t, tmp_path / "orig.parquet")
    con = ibis.duckdb.connect()
    orig = con.read_parquet(tmp_path / "orig.parquet", table_name="orig")
    sf = connect(tmp_path / "s", con=con, name="acc")
    # The dimensions here hold a good share of the 4000 rows; push every one of them (the
    # default size rule is tested apart).
    sf.eager_max_fraction = 1e18
    return orig, sf


def rows(t: pa.Table):
    out = []
    for r in t.to_pylist():
        out.append(tuple(round(v, 9) if isinstance(v, float) else v for v in r.values()).__repr__())
    return sorted(out)


def check(orig, sf, make, pushed=True):
    want = make(orig).to_pyarrow()
    got = sf.to_pyarrow(make(sf.table))
    assert got.schema == want.schema
    assert rows(got) == rows(want)
    assert bool(sf.last_rewrite["eager"]) == pushed, sf.last_rewrite
    return sf.last_rewrite


def test_count_by_a_dimension_column_aggregates_on_keys_first(frames):
    orig, sf = frames
    info = check(orig, sf, lambda t: t.group_by("state").agg(n=t.count()))
    assert info["eager"][0]["inner_columns"] == []  # the pre-aggregate reads only keys
    sql = sf.sql(sf.table.group_by("state").agg(n=sf.table.count()))
    assert "GROUP BY t0.__k" in sql.replace('"', "")


def test_fact_and_dimension_aggregates_with_nulls(frames):
    orig, sf = frames
    check(
        orig,
        sf,
        lambda t: t.group_by("state", "tz").agg(
            n=t.count(),
            s=t.sev.sum(),
            lo=t.sev.min(),
            hi=t.sev.max(),
            c=t.sev.count(),
            m=t.sev.mean(),
            cities=t.city.count(),
            first_city=t.city.min(),
            last_city=t.city.max(),
            r=t["rank"].mean(),
        ),
    )


def test_group_by_an_expression_of_dimension_and_fact_columns(frames):
    orig, sf = frames

    def q(t):
        return t.group_by(big=t.id > 2000, south=t.state.isin(["Texas State"])).agg(
            n=t.count(), m=t.sev.mean()
        )

    check(orig, sf, q)  # forced: the fixture pushes whatever the size rule would allow
    # By default a GROUP BY item over a fact column (distinct count unknown, bounded by the
    # fact's rows) keeps the pre-aggregate from being provably small: join, then aggregate.
    sf.eager_max_fraction = eager.MAX_PUSHED_KEYS_FRACTION
    check(orig, sf, q, pushed=False)


def test_filter_on_the_fact_then_group_by_a_dimension(frames):
    orig, sf = frames

    def q(t):
        f = t.filter(t.sev > 0)
        return f.group_by("city").agg(n=f.count(), s=f.sev.sum())

    check(orig, sf, q)


def test_unpushable_shapes_fall_back_and_stay_correct(frames):
    orig, sf = frames
    # SUM of a dimension column, COUNT DISTINCT, a filter on the grouped dimension.
    check(orig, sf, lambda t: t.group_by("state").agg(s=t.city.length().sum()), pushed=False)
    check(orig, sf, lambda t: t.group_by("state").agg(d=t.city.nunique()), pushed=False)

    def filtered(t):
        f = t.filter(t.state.notnull())
        return f.group_by("state").agg(n=f.count())

    check(orig, sf, filtered, pushed=False)


def test_group_column_also_aggregated_after_a_filter(frames):
    # SQLGlot's merge_subqueries leaves a dangling alias for this shape; SplitDF must notice and
    # keep the unmerged query.
    orig, sf = frames

    def q(t):
        f = t.filter(t.sev > 0)
        return f.group_by("sev").agg(n=f.count(), s=f.sev.sum(), d=f.sev.nunique())

    want = q(orig).to_pyarrow()
    got = sf.to_pyarrow(q(sf.table))
    assert rows(got) == rows(want)


def test_eager_aggregation_can_be_turned_off(frames):
    orig, sf = frames
    sf.eager_aggregation = False
    check(orig, sf, lambda t: t.group_by("state").agg(n=t.count()), pushed=False)


def test_large_dimensions_are_not_pushed(frames):
    orig, sf = frames
    sf.eager_max_fraction = 0.0  # no dimension is small enough
    check(orig, sf, lambda t: t.group_by("state").agg(n=t.count()), pushed=False)


def test_a_large_dimension_joined_beneath_the_pre_aggregate_stops_the_push(tmp_path):
    n = 4000
    t = pa.table(
        {
            "g": [f"Group name number {i % 4}" for i in range(n)],
            "m": [f"A measure-like long value {i % 1000:04d}" for i in range(n)],
            "id": list(range(n)),
        }
    )
    res = split_arrow(t, tmp_path / "s", strategy="paper")
    assert sorted(res.dim_rows) == [4, 1000], res.plan
    pq.write_table(t, tmp_path / "orig.parquet")
    con = ibis.duckdb.connect()
    orig = con.read_parquet(tmp_path / "orig.parquet", table_name="orig")
    sf = connect(tmp_path / "s", con=con, name="acc")

    def make(t):
        return t.group_by("g").agg(n=t.count(), mx=t.m.max())

    sf.eager_max_fraction = 1 / 8  # m's 1,000-row dimension > 4,000 / 8: join first
    check(orig, sf, make, pushed=False)
    sf.eager_max_fraction = 1 / 2  # 1,000 <= 2,000: pushed, m joined beneath
    check(orig, sf, make, pushed=True)


def test_rewrite_is_memoized_per_expression(frames):
    _, sf = frames
    t = sf.table
    sql = sf.sql(t.group_by("state").agg(n=t.count()))
    assert not sf.last_rewrite.get("cached")
    # An equal expression built again (a re-run cell) hits the memo.
    assert sf.sql(t.group_by("state").agg(n=t.count())) == sql
    assert sf.last_rewrite.get("cached")
    sf.sql(t.group_by("tz").agg(n=t.count()))
    assert not sf.last_rewrite.get("cached")


def test_keys_of_dimensions_over_4096_rows_group_with_a_perfect_hash_table(tmp_path):
    # 6,000 distinct long names: a dimension whose keys need 13 bits, past DuckDB's default
    # perfect-hash threshold of 12 bits; connect() raises it, and the eager GROUP BY key uses it.
    n = 60_000
    t = pa.table(
        {
            "name": [f"A fairly long customer name number {i % 6000}" for i in range(n)],
            "v": [i % 7 for i in range(n)],
        }
    )
    res = split_arrow(t, tmp_path / "s", strategy="paper")
    assert res.dim_rows == [6000], res.plan
    pq.write_table(t, tmp_path / "orig.parquet")
    con = ibis.duckdb.connect()
    orig = con.read_parquet(tmp_path / "orig.parquet", table_name="orig")
    sf = connect(tmp_path / "s", con=con, name="acc", load="table")
    assert con.con.execute("SELECT current_setting('perfect_ht_threshold')").fetchall() == [(13,)]
    sf.eager_max_fraction = 1.0
    check(orig, sf, lambda t: t.group_by("name").agg(n=t.count(), s=t.v.sum()))
    plan = con.con.execute("EXPLAIN " + sf.sql(sf.table.group_by("name").agg(n=sf.table.count())))
    text = "\n".join(r[1] for r in plan.fetchall())
    assert "perfect hash group by" in text.lower(), text


def test_a_higher_perfect_hash_threshold_of_the_caller_is_kept(tmp_path):
    t = pa.table({"name": [f"A long name {i % 50}" for i in range(5000)]})
    split_arrow(t, tmp_path / "s")
    con = ibis.duckdb.connect()
    con.raw_sql("SET perfect_ht_threshold = 20")
    connect(tmp_path / "s", con=con, name="acc")
    assert con.con.execute("SELECT current_setting('perfect_ht_threshold')").fetchall() == [(20,)]
