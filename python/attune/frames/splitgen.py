"""SplitGen: choose attribute groups to split a table into (Algorithm 6 of the source, chapter 4).

Pure functions over column statistics; no I/O. Thread-safe (no shared state).

Two strategies. ``paper``: Algorithm 6 as printed (below). ``fd`` (the default of the writer):
the columns that an exact functional dependency ties to a determinant are grouped first
(``fd_groups``), each group then enters the same sweep as one attribute whose distinct count is
the determinant's. Algorithm 6 estimates a group's rows by the product of its columns' distinct
counts, so a determinant with its dependents (city -> county -> state) looks far larger than the
dimension it really makes and is split off alone or not at all; with the dependency known, the
group's row count is exact. With no dependency the two strategies give the same plan.

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

PAPER = "paper"  # Algorithm 6 as printed
FD = "fd"  # functional-dependency groups, then Algorithm 6
STRATEGIES = (FD, PAPER)


@dataclass(frozen=True)
class Dependency:
    """Exact functional dependencies ``determinant -> each of dependents`` (verified on every row:
    ``|distinct(X)| == |distinct(X, Y)|``, NULL counted as a value)."""

    determinant: str
    dependents: tuple[str, ...]


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
    strategy: str = PAPER
    dependencies: tuple[Dependency, ...] = ()  # used by strategy FD

    @property
    def total_size(self) -> int:
        return sum(c.total_size for c in self.columns)


@dataclass(frozen=True)
class Step:
    """One iteration of the sweep, kept for ``--explain``."""

    candidate: tuple[str, ...]
    act: float
    est: float
    # "grow", "emit", "fact", "flush", "drop" (over max_dims, back to the fact) or "fd" (a
    # dependency group formed before the sweep; EST counts the determinant's distinct values)
    action: str


@dataclass
class Plan:
    """Result of SplitGen: dimension groups (in emission order) and attributes left in the fact."""

    dims: list[tuple[str, ...]]
    fact: list[str]
    steps: list[Step] = field(default_factory=list)
    variant: str = EXACT
    strategy: str = PAPER
    # Dependency groups formed before the sweep (strategy FD): determinant -> its group's columns
    fd_groups: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def estimated_saving(self, stats: TableStats) -> float:
        units = unit_stats(stats, self.fd_groups)
        by_name = {c.name: c for c in units.columns}
        member = {m: d for d, g in self.fd_groups.items() for m in g}
        total = 0.0
        for g in self.dims:
            names = list(dict.fromkeys(member.get(a, a) for a in g))
            cols = [by_name[a] for a in names]
            total += act_size(cols, units) - est_size(cols, units)
        return total


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
    """SplitGen with ``stats.strategy``: Algorithm 6 (``paper``), or dependency groups first and
    then Algorithm 6 over them and the other columns (``fd``)."""
    if stats.strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {stats.strategy!r}; expected one of {STRATEGIES}")
    if stats.strategy == PAPER or not stats.dependencies:
        plan = _sweep(stats)
        plan.strategy = stats.strategy
        return plan
    groups, fd_steps = fd_groups(stats)
    units = unit_stats(stats, groups)
    plan = _sweep(units)
    expand = {d: g for d, g in groups.items()}

    def names(unit_names) -> tuple[str, ...]:
        return tuple(m for u in unit_names for m in expand.get(u, (u,)))

    return Plan(
        dims=[names(g) for g in plan.dims],
        fact=list(names(plan.fact)),
        steps=fd_steps + [Step(names(s.candidate), s.act, s.est, s.action) for s in plan.steps],
        variant=stats.variant,
        strategy=FD,
        fd_groups=dict(groups),
    )


def unit_stats(stats: TableStats, groups: dict[str, tuple[str, ...]]) -> TableStats:
    """``stats`` with each dependency group replaced by one attribute named after its
    determinant: distinct count of the determinant (exact: the group has exactly that many
    distinct rows), sizes summed over the group's columns."""
    if not groups:
        return stats
    by_name = {c.name: c for c in stats.columns}
    member = {m: d for d, g in groups.items() for m in g}
    cols: list[ColumnStats] = []
    for c in stats.columns:
        d = member.get(c.name)
        if d is None:
            cols.append(c)
        elif d == c.name:
            g = [by_name[m] for m in groups[d]]
            cols.append(
                ColumnStats(
                    name=d,
                    distinct=c.distinct,
                    max_size=sum(x.max_size for x in g),
                    total_size=sum(x.total_size for x in g),
                )
            )
    return TableStats(
        nrows=stats.nrows,
        columns=tuple(cols),
        variant=stats.variant,
        narrow_keys=stats.narrow_keys,
        max_dims=stats.max_dims,
        strategy=stats.strategy,
    )


def fd_groups(stats: TableStats) -> tuple[dict[str, tuple[str, ...]], list[Step]]:
    """Groups of columns tied to a determinant by exact dependencies, chosen greedily.

    For a determinant ``X`` the group is ``X`` plus every dependent ``Y`` still free whose
    marginal saving is positive: the group has exactly ``distinct(X)`` rows whatever dependents
    it holds, so ``Y`` adds ``total_size(Y)`` to ACT and ``distinct(X) * size(Y)`` to EST
    (``size`` = max size, or average in the approximate variant). Among all determinants the
    group with the largest ``ACT - EST`` is taken, its columns leave the pool, and the rest are
    re-evaluated until no group saves bytes. Each group's EST is the same formula as the sweep's
    with the determinant's distinct count, an upper bound of the real cost in the exact variant
    (the dependency holds on every row), so the exact guarantee is kept.
    """
    by_name = {c.name: c for c in stats.columns}
    deps: dict[str, set[str]] = {}
    for dep in stats.dependencies:
        if dep.determinant not in by_name:
            raise ValueError(f"dependency on unknown column {dep.determinant!r}")
        for y in dep.dependents:
            if y not in by_name:
                raise ValueError(f"dependency on unknown column {y!r}")
        deps.setdefault(dep.determinant, set()).update(
            y for y in dep.dependents if y != dep.determinant
        )
    n = stats.nrows
    pool = set(by_name)
    groups: dict[str, tuple[str, ...]] = {}
    steps: list[Step] = []

    def size(c: ColumnStats) -> float:
        return c.max_size if stats.variant == EXACT else c.avg_size(n)

    while True:
        best: tuple[float, str, tuple[str, ...], float, float] | None = None
        for x in sorted(deps):
            if x not in pool:
                continue
            cx = by_name[x]
            rows = max(cx.distinct, 1)
            members = [x] + sorted(
                y for y in deps[x] if y in pool and by_name[y].total_size > rows * size(by_name[y])
            )
            if len(members) < 2:
                continue
            cols = [by_name[m] for m in members]
            unit = ColumnStats(
                x, cx.distinct, sum(c.max_size for c in cols), sum(c.total_size for c in cols)
            )
            act = act_size(cols, stats)
            est = est_size([unit], stats)
            if act > est and (best is None or act - est > best[0]):
                best = (act - est, x, tuple(members), act, est)
        if best is None:
            break
        _, x, members, act, est = best
        groups[x] = members
        steps.append(Step(members, act, est, "fd"))
        pool.difference_update(members)
    return groups, steps


def _sweep(stats: TableStats) -> Plan:
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
