"""SplitGen (Algorithm 6) on hand-made statistics: order of the sweep, ACT/EST, the final flush."""

from attune.frames.splitgen import (
    APPROX,
    EXACT,
    ColumnStats,
    TableStats,
    act_size,
    est_size,
    gen_attribute_groups,
)


def col(name, distinct, max_size, avg_size, nrows=1000):
    return ColumnStats(name, distinct, max_size, int(avg_size * nrows))


def test_act_and_est_follow_the_formulas():
    n = 1000
    a, b = col("a", 3, 10, 9, n), col("b", 5, 20, 12, n)
    stats = TableStats(n, (a, b), EXACT)
    assert act_size([a, b], stats) == n * 9 + n * 12
    assert est_size([a, b], stats) == (10 + 20 + 8) * 3 * 5 + n * 8


def test_approx_estimate_uses_average_sizes():
    n = 1000
    a = col("a", 4, 100, 10, n)
    assert est_size([a], TableStats(n, (a,), APPROX)) == (10 + 8) * 4 + n * 8
    assert est_size([a], TableStats(n, (a,), EXACT)) == (100 + 8) * 4 + n * 8


def test_attributes_are_visited_in_ascending_distinct_order():
    stats = TableStats(1000, (col("z", 50, 30, 30), col("y", 2, 30, 30), col("x", 7, 30, 30)))
    plan = gen_attribute_groups(stats)
    assert plan.steps[0].candidate == ("y",)
    assert [s.candidate[-1] for s in plan.steps][:3] == ["y", "x", "z"]


def test_last_open_group_is_flushed():
    # Every candidate shrinks the data: the sweep never emits, so without the flush that the
    # source's pseudocode forgets, the whole group would be lost.
    stats = TableStats(10_000, (col("a", 2, 40, 40, 10_000), col("b", 3, 40, 40, 10_000)))
    plan = gen_attribute_groups(stats)
    assert plan.dims == [("a", "b")]
    assert plan.fact == []
    assert plan.steps[-1].action == "flush"


def test_unsplittable_attributes_stay_in_the_fact_table():
    # Unique 8-byte values: a dimension costs more than the column itself.
    stats = TableStats(1000, (col("id", 1000, 8, 8), col("v", 1000, 8, 8)))
    plan = gen_attribute_groups(stats)
    assert plan.dims == []
    assert sorted(plan.fact) == ["id", "v"]


def test_failed_candidate_emits_group_and_retries_attribute_alone():
    n = 100_000
    stats = TableStats(
        n, (col("s", 2, 50, 50, n), col("t", 4, 50, 50, n), col("u", 90_000, 50, 50, n))
    )
    plan = gen_attribute_groups(stats)
    # {s,t} grows; {s,t,u} is too big -> {s,t} emitted; u alone: (50+8)*90000 + 8n < 50n? 5.22M+0.8M
    # > 5M, so u goes to the fact.
    assert plan.dims == [("s", "t")]
    assert plan.fact == ["u"]
    assert [s.action for s in plan.steps] == ["grow", "grow", "emit", "fact"]


def test_every_attribute_is_placed_exactly_once():
    n = 5000
    cols = tuple(
        col(f"c{i}", d, 8 + i, 8 + i / 2, n) for i, d in enumerate([1, 3, 9, 27, 81, 5000])
    )
    plan = gen_attribute_groups(TableStats(n, cols))
    placed = [c for g in plan.dims for c in g] + plan.fact
    assert sorted(placed) == sorted(c.name for c in cols)
    for g in plan.dims:
        gs = [c for c in cols if c.name in g]
        assert est_size(gs, TableStats(n, cols)) < act_size(gs, TableStats(n, cols))


def test_narrow_keys_let_narrow_columns_split():
    n = 10_000
    cols = (col("year", 1, 8, 8, n), col("month", 12, 8, 8, n))
    assert gen_attribute_groups(TableStats(n, cols)).dims == []
    plan = gen_attribute_groups(TableStats(n, cols, narrow_keys=True))
    assert plan.dims == [("year", "month")]


def test_max_dims_keeps_the_groups_that_save_the_most():
    n = 100_000
    # Three single-column groups (any pair costs more than it saves); savings a > c > b.
    cols = (
        col("a", 2, 30, 30, n),
        col("b", 60_000, 40, 40, n),
        col("c", 70_000, 100, 100, n),
        col("id", n, 8, 8, n),
    )
    free = gen_attribute_groups(TableStats(n, cols))
    assert free.dims == [("a",), ("b",), ("c",)]
    assert gen_attribute_groups(TableStats(n, cols, max_dims=2)).dims == [("a",), ("c",)]
    plan = gen_attribute_groups(TableStats(n, cols, max_dims=1))
    assert len(plan.dims) == 1
    kept = plan.dims[0]
    stats = TableStats(n, cols)
    by = {c.name: c for c in cols}

    def saving(g):
        return act_size([by[a] for a in g], stats) - est_size([by[a] for a in g], stats)

    assert saving(kept) == max(saving(g) for g in free.dims)
    placed = [c for g in plan.dims for c in g] + plan.fact
    assert sorted(placed) == sorted(by)
    dropped = [s for s in plan.steps if s.action == "drop"]
    assert len(dropped) == len(free.dims) - 1


def test_max_dims_above_the_group_count_changes_nothing():
    n = 100_000
    cols = (col("a", 2, 30, 30, n), col("b", 90_000, 50, 50, n))
    free = gen_attribute_groups(TableStats(n, cols))
    assert gen_attribute_groups(TableStats(n, cols, max_dims=5)).dims == free.dims
