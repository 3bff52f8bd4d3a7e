"""SplitGen: choose attribute groups to split a table into (Algorithm 6 of the source, chapter 4).

Pure functions over column statistics; no I/O. Thread-safe (no shared state).

The greedy sweep visits attributes in ascending order of distinct count and grows a candidate group
while the estimated size of splitting it off (EST) stays below the size the group occupies in the
table today (ACT). A group that stops growing is emitted as a dimension; an attribute that cannot
even be split on its own stays in the fact table. The source's pseudocode forgets the group that is
still open when the sweep ends; we flush it (``gen_attribute_groups`` docs, step "flush").

Invariants:
- Every attribute lands in exactly one dimension group or in the fact list.
- Exact variant: for every emitted group, EST < ACT, and EST is an upper bound of the real split
  cost of that group (distinct counts include NULL as a value; max sizes are exact; the key is at
  most 8 bytes), so the split never grows the data under the size model in ``stats``.
- Approximate variant: EST uses HyperLogLog distinct counts and average sizes (as the source's
  Velox implementation does); there is no guarantee, so callers measure the real split.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Width of the joining key assumed by the estimate. Default 8 bytes (a BIGINT), the source's choice;
# the writer may store narrower keys, which keeps EST an upper bound.
KEY_BYTES = 8


def fit_key_bytes(n_keys: int) -> int:
    """Bytes of the narrowest signed integer holding keys 0..n_keys-1 (what the writer stores).

    ``narrow_keys=True`` estimates with this width of the product of distinct counts, an upper
    bound of the dimension's row count, so the writer's key is never wider and EST stays an upper
    bound. Not in the source: with 8-byte keys no 8-byte column can be split off on its own, and
    since the sweep starts every group with one attribute, tables of narrow columns never split.
    """
    for width, limit in ((1, 2**7), (2, 2**15), (4, 2**31)):
        if n_keys <= limit:
            return width
    return 8


EXACT = "exact"
APPROX = "approx"
VARIANTS = (EXACT, APPROX)


@dataclass(frozen=True)
class ColumnStats:
    """Statistics of one column. Sizes are bytes under the size model of ``attune.frames.stats``."""

    name: str
    distinct: int  # distinct values, NULL counted as one value (exact or HyperLogLog estimate)
    max_size: int  # largest value size in bytes
    total_size: int  # sum of value sizes over all rows (exact); avg_size = total_size / nrows

    def avg_size(self, nrows: int) -> float:
        return self.total_size / nrows if nrows else 0.0


@dataclass(frozen=True)
class TableStats:
    nrows: int
    columns: tuple[ColumnStats, ...]
    variant: str = EXACT
    narrow_keys: bool = False  # estimate with fit_key_bytes(product of distinct) instead of 8
    max_dims: int | None = None  # keep at most this many groups (largest savings); None: all

    @property
    def total_size(self) -> int:
        return sum(c.total_size for c in self.columns)


@dataclass(frozen=True)
class Step:
    """One iteration of the sweep, kept for ``--explain``."""

    candidate: tuple[str, ...]
    act: float
    est: float
    action: str  # "grow", "emit", "fact", "flush" or "drop" (over max_dims, back to the fact)


@dataclass
class Plan:
    """Result of SplitGen: dimension groups (in emission order) and attributes left in the fact."""

    dims: list[tuple[str, ...]]
    fact: list[str]
    steps: list[Step] = field(default_factory=list)
    variant: str = EXACT

    def estimated_saving(self, stats: TableStats) -> float:
        by_name = {c.name: c for c in stats.columns}
        return sum(
            act_size([by_name[a] for a in g], stats) - est_size([by_name[a] for a in g], stats)
            for g in self.dims
        )


def act_size(group: list[ColumnStats], stats: TableStats) -> float:
    """ACT(G): bytes the group's columns occupy in the table, sum over attrs of nrows * avg_size.

    Computed as the exact total (nrows * avg_size == total_size) to avoid rounding.
    """
    return float(sum(c.total_size for c in group))


def est_size(group: list[ColumnStats], stats: TableStats) -> float:
    """EST(G) = (sum of value sizes + key) * product of distinct counts + nrows * key.

    Exact variant: value size is max_size (an upper bound). Approximate variant: avg_size, as the
    source's Velox implementation relaxes it.
    """
    n = stats.nrows
    rows = 1
    tuple_size = 0.0
    for c in group:
        rows *= max(c.distinct, 1)
        tuple_size += c.max_size if stats.variant == EXACT else c.avg_size(n)
    key = fit_key_bytes(rows) if stats.narrow_keys else KEY_BYTES
    tuple_size += key
    return tuple_size * rows + n * key


def gen_attribute_groups(stats: TableStats) -> Plan:
    """Algorithm 6 (GenAttributeGroups) with the final flush of the open group.

    Attributes are sorted by ascending distinct count (ties by name, for determinism). The loop
    visits each attribute at most twice: once growing a group, once more alone after the group it
    failed to join was emitted.
    """
    if stats.variant not in VARIANTS:
        raise ValueError(f"unknown variant {stats.variant!r}")
    attrs = sorted(stats.columns, key=lambda c: (c.distinct, c.name))
    plan = Plan(dims=[], fact=[], variant=stats.variant)
    group: list[ColumnStats] = []
    i = 0
    visits_max = 2 * len(attrs) + 1  # bound on the loop (each attribute at most twice)
    visits = 0
    while i < len(attrs):
        visits += 1
        assert visits <= visits_max, "SplitGen sweep did not terminate"
        candidate = group + [attrs[i]]
        est = est_size(candidate, stats)
        act = act_size(candidate, stats)
        names = tuple(c.name for c in candidate)
        if est < act:
            group = candidate
            i += 1
            plan.steps.append(Step(names, act, est, "grow"))
        elif group:
            plan.dims.append(tuple(c.name for c in group))
            plan.steps.append(Step(names, act, est, "emit"))
            group = []
        else:
            plan.fact.append(attrs[i].name)
            plan.steps.append(Step(names, act, est, "fact"))
            i += 1
    if group:  # the flush the source's pseudocode omits
        names = tuple(c.name for c in group)
        plan.dims.append(names)
        plan.steps.append(Step(names, act_size(group, stats), est_size(group, stats), "flush"))
    if stats.max_dims is not None:
        bound_dims(plan, stats, stats.max_dims)
    return plan


def bound_dims(plan: Plan, stats: TableStats, max_dims: int) -> None:
    """Keep the ``max_dims`` groups with the largest estimated saving (ACT - EST); the columns
    of the others go back to the fact table (step action "drop").

    Not in the source. The cost model counts bytes, not joins: a query touching k of the groups
    joins k dimensions, and with narrow keys SplitGen splits off many single-column
    "dictionary" groups that each save little. Bounding the count bounds every query's joins
    while keeping the groups that save the most. Each kept group still has EST < ACT, so the
    exact variant's guarantee holds.
    """
    if max_dims < 0:
        raise ValueError(f"max_dims must be >= 0, got {max_dims}")
    if len(plan.dims) <= max_dims:
        return
    by_name = {c.name: c for c in stats.columns}

    def saving(g: tuple[str, ...]) -> float:
        cols = [by_name[a] for a in g]
        return act_size(cols, stats) - est_size(cols, stats)

    ranked = sorted(range(len(plan.dims)), key=lambda i: (-saving(plan.dims[i]), i))
    keep = set(ranked[:max_dims])
    for i, g in enumerate(plan.dims):
        if i not in keep:
            cols = [by_name[a] for a in g]
            plan.steps.append(Step(g, act_size(cols, stats), est_size(cols, stats), "drop"))
            plan.fact.extend(g)
    plan.dims = [g for i, g in enumerate(plan.dims) if i in keep]
