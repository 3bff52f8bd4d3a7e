"""Heimdall against the baselines, over random windows of real (or synthetic) traces.

One *window pair* is two windows of ``window_ios`` consecutive I/Os, each drawn from a trace of the
pool at a random start and given one of the chapter's augmentations (none, re-rate 0.1×, 0.5×,
2×, resize 2×, 4×). Window ``i`` is the workload of replica ``i``. Each window is split 50:50 by
I/O count: the first half, served alone by a simulated SSD, trains that device's models (Heimdall
and LinnOS) and sets hedging's timeout (p98 of the training reads); the second half is served by
both replicas under every policy. Accuracy is measured on the second half served alone (ROC-AUC of
the quantised model's scores against the period labels and against the simulator's ground truth
of busy reads). Deterministic for a seed.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import asdict, dataclass, field

import numpy as np

from attune.errors import InvalidArgumentError
from attune.io import HEDGE_DELAY_FACTOR, replay, route
from attune.io import heimdall as hd
from attune.io.trace import Trace

#: The chapter's augmentations: (name, re-rate factor, resize factor).
AUGMENTATIONS = (
    ("none", 1.0, 1.0),
    ("rerate0.1", 0.1, 1.0),
    ("rerate0.5", 0.5, 1.0),
    ("rerate2", 2.0, 1.0),
    ("resize2", 1.0, 2.0),
    ("resize4", 1.0, 4.0),
)
#: Reads each half of a window must hold.
MIN_READS = 50
#: Policies compared by :func:`evaluate_pair`.
POLICIES = (
    "baseline",
    "random",
    "hedging",
    "c3",
    "linnos",
    "heimdall",
    "heimdall-home",
    "heimdall-rank",
    "heimdall-cost",
    "heimdall-live",
    "heimdall-live-rank",
    "heimdall-live-cost",
    "c3-probe",
    "heimdall-live-rank-probe",
    "heimdall-live-cost-probe",
    "c3-clock",
    "heimdall-live-rank-clock",
    "heimdall-live-rank-probe-clock",
    "c3-clock-refined",
    "heimdall-live-rank-clock-refined",
    "heimdall-live-expect",
    "heimdall-live-expect-clock-refined",
    "c3-clock-voted",
    "heimdall-live-rank-clock-voted",
    "c3-clock-told",
    "heimdall-live-rank-clock-told",
    "c3-clock-voted-hedged",
    "c3-clock-voted-hedged-all",
    "heimdall-live-rank-clock-voted-hedged",
    "heimdall-live-rank-clock-voted-hedged-all",
    "oracle",
)
#: Heimdall's policies: the chapter's (a declined read goes to the next replica, which admits),
#: the variant where a read every replica declines stays home, and the two that score every
#: replica (``heimdall-rank``: C3 picks among the least predicted slow; ``heimdall-cost``: the
#: shortest queue, a replica predicted slow counting ``slow_factor`` times).
HEIMDALL_POLICIES = tuple(p for p in POLICIES if p.startswith("heimdall"))
#: The policies that run the live model (Heimdall's features plus the reads in flight,
#: ``features="live"``) with the rule of the policy of the same name without ``-live``.
LIVE_POLICIES = (
    "heimdall-live",
    "heimdall-live-rank",
    "heimdall-live-cost",
    "heimdall-live-rank-probe",
    "heimdall-live-cost-probe",
    "heimdall-live-rank-clock",
    "heimdall-live-rank-probe-clock",
    "heimdall-live-rank-clock-refined",
    "heimdall-live-expect",
    "heimdall-live-expect-clock-refined",
    "heimdall-live-rank-clock-voted",
    "heimdall-live-rank-clock-told",
    "heimdall-live-rank-clock-voted-hedged",
    "heimdall-live-rank-clock-voted-hedged-all",
)
#: Policies with probe reads (``route(..., probe_reads_us=...)``): a replica with no read
#: completed or in flight for :data:`PROBE_READS_US` gets a 4 KiB read whose completion refreshes
#: its history. ``c3-probe`` is C3 with the same probes: a reference that says how much of a
#: probing policy's gain is the probes' alone (not one of the chapter's baselines).
PROBE_POLICIES = (
    "c3-probe",
    "heimdall-live-rank-probe",
    "heimdall-live-cost-probe",
    "heimdall-live-rank-probe-clock",
)
#: Policies with the write clock (``route(..., write_clock=...)``): each replica's count of the
#: bytes written to it predicts its garbage collection, and a replica it predicts busy counts as
#: predicted slow (``attune_io::clock``; fitted by :func:`attune.io.heimdall.fit_write_clock` on
#: training halves). ``c3-clock`` is C3 with the same clock: a reference, not a baseline.
CLOCK_POLICIES = (
    "c3-clock",
    "heimdall-live-rank-clock",
    "heimdall-live-rank-probe-clock",
    "c3-clock-refined",
    "heimdall-live-rank-clock-refined",
    "heimdall-live-expect-clock-refined",
    "c3-clock-voted",
    "heimdall-live-rank-clock-voted",
    "c3-clock-told",
    "heimdall-live-rank-clock-told",
    "c3-clock-voted-hedged",
    "c3-clock-voted-hedged-all",
    "heimdall-live-rank-clock-voted-hedged",
    "heimdall-live-rank-clock-voted-hedged-all",
)
#: Clock policies whose anchored clock (unknown phase) is refined (:data:`CLOCK_REFINEMENTS`);
#: with a known phase they equal the policy of the same name without ``-refined``.
REFINED_POLICIES = tuple(p for p in CLOCK_POLICIES if p.endswith("-refined"))
#: The refined anchored clock: it also counts the writes sent while the anchoring read was
#: outstanding, and re-anchors only once a collection is due (``route``'s
#: ``clock_anchor_writes`` and ``clock_anchor_gate``).
CLOCK_REFINEMENTS = {"clock_anchor_writes": True, "clock_anchor_gate": True}
#: References for the unknown phase: the clock is told each replica's age, so its phase is
#: known (``route(..., clock_anchor_us=0)`` with ``aged_bytes``); with a known phase they equal
#: the policy of the same name without ``-told``.
TOLD_POLICIES = ("c3-clock-told", "heimdall-live-rank-clock-told")
#: Clock policies whose unknown phase is voted, not anchored (``route(..., clock_vote=True)``,
#: ``attune_io::clock::PhaseVote``); with a known phase they equal the policy without ``-voted``.
VOTED_POLICIES = (
    "c3-clock-voted",
    "heimdall-live-rank-clock-voted",
    "c3-clock-voted-hedged",
    "c3-clock-voted-hedged-all",
    "heimdall-live-rank-clock-voted-hedged",
    "heimdall-live-rank-clock-voted-hedged-all",
)
#: Policies that read a risky read again from another replica when it has not answered after
#: the slow-read threshold (``route(..., hedge_delay_us=...)``, ``attune_io::route::RiskyHedge``;
#: the first answer wins, both reads load their devices). Risky: the chosen replica's voted clock
#: has no phase yet or its best candidates disagree, or (the model policies) the chosen
#: replica's slow margin is above ``-HEDGE_MARGIN`` logits. ``-hedged-all`` hedges every read
#: after the same delay: a reference for what the risk rule saves in backup reads.
HEDGED_POLICIES = (
    "c3-clock-voted-hedged",
    "c3-clock-voted-hedged-all",
    "heimdall-live-rank-clock-voted-hedged",
    "heimdall-live-rank-clock-voted-hedged-all",
)
#: The model margin (logits) within which a read counts as risky for the ``-hedged`` model
#: policies: the live policies' tie margin. Without it (``hedge_margin=None``) the validation
#: windows gave the same median (16.1 % below C3 at a 4× delay).
HEDGE_MARGIN = 1.0
#: The backup read's delay is :data:`attune.io.HEDGE_DELAY_FACTOR` × the slow-read threshold
#: (the period labelling's high-latency threshold, ``rule.lat_factor`` × the training halves'
#: median read latency), 2×: chosen on the validation windows (seed 2, 8 pairs, unknown phase),
#: where 1, 2, 4, 8× gave the voted rank policy 12.9, 16.3, 16.1, 15.2 % below C3 (unhedged
#: 14.1 %) with 0.7, 0.4, 0.3, 0.1 backup reads per 100 client reads.
REFERENCE_POLICIES = (
    "c3-probe",
    "c3-clock",
    "c3-clock-refined",
    "c3-clock-voted",
    "c3-clock-voted-hedged",
    "c3-clock-voted-hedged-all",
    *TOLD_POLICIES,
)
#: Staleness (µs) after which a replica is probed, chosen on the validation windows (1 ms: 0.57
#: probes per client read; 5 ms: 0.29, and better).
PROBE_READS_US = 5000.0
#: ``heimdall-rank``'s tie margin (logits) and ``heimdall-cost``'s slow factor, chosen on
#: validation windows (seed 2) that the headline figures (seed 1) do not use.
RANK_TIE = 2.0
SLOW_FACTOR = 10.0
#: The live policies' tie margin, chosen the same way (seed 2, 8 pairs; τ = 1, 2, 4 tried).
LIVE_RANK_TIE = 1.0
#: Not routers: bounds (the oracle serves each read on a copy of every replica and picks the one
#: that answers first, which needs the future).
BOUND_POLICIES = ("oracle",)
#: The accuracy ladder: (stage, labelling, features, noise filter).
LADDER = (
    ("cutoff labels + min-max (LB+FC)", "cutoff", "basic", False),
    ("+ period labels (LA)", "period", "basic", False),
    ("+ size and throughput features (FE)", "period", "full", False),
    ("+ noise filters (LN) = Heimdall", "period", "full", True),
    ("+ in-flight features (live)", "period", "live", True),
)


@dataclass
class Window:
    trace: str
    start: int
    augmentation: str


@dataclass
class PairResult:
    windows: list[Window]
    latency_us: dict[str, dict[str, float]] = field(default_factory=dict)
    redirected: dict[str, int] = field(default_factory=dict)
    #: Per policy: the share of reads that met a garbage-collection busy period (ground truth).
    gc_share: dict[str, float] = field(default_factory=dict)
    #: Per policy: the share of all reads each replica served (queue balance).
    served_share: dict[str, list[float]] = field(default_factory=dict)
    #: Per policy: probe reads sent, over the client reads (0 without probes).
    probe_share: dict[str, float] = field(default_factory=dict)
    #: Per policy: backup reads sent (hedging's, or for risky reads), over the client reads.
    backup_share: dict[str, float] = field(default_factory=dict)
    #: Per policy: read latency (µs) at :data:`CDF_PERCENTILES`.
    quantiles_us: dict[str, list[float]] = field(default_factory=dict)
    auc_period: float = float("nan")
    auc_busy: float = float("nan")
    auc_linnos_period: float = float("nan")
    #: The live model (``features="live"``), as ``auc_period`` / ``auc_busy``.
    auc_period_live: float = float("nan")
    auc_busy_live: float = float("nan")
    #: The simulator's ground truth (read met a busy chip) as the score against the period labels:
    #: how much of the labels a perfect busy-period detector would explain.
    auc_truth_vs_labels: float = float("nan")
    ladder_auc: dict[str, float] = field(default_factory=dict)
    joint_auc: dict[int, float] = field(default_factory=dict)
    busy_fraction: float = 0.0
    slow_fraction: float = 0.0
    #: The write clock the clock policies ran with (None: none fitted).
    write_clock: list | None = None
    #: ``heimdall-live-expect*``'s slow-to-fast latency ratio (training halves).
    expect_factor: float = 1.0

    def to_dict(self) -> dict:
        return asdict(self)


def augment(t: Trace, name: str) -> Trace:
    for n, rate, size in AUGMENTATIONS:
        if n == name:
            out = t.rerate(rate) if rate != 1.0 else t
            return out.resize(size) if size != 1.0 else out
    raise InvalidArgumentError(
        f"unknown augmentation {name!r}; valid: {', '.join(a[0] for a in AUGMENTATIONS)}"
    )


def random_windows(
    pool: list[Trace],
    pairs: int,
    window_ios: int,
    seed: int,
    *,
    replicas: int = 2,
    augmentations: bool = True,
    min_busy: float = 0.0,
    params: dict | None = None,
) -> list[list[tuple]]:
    """``pairs`` lists of ``replicas`` (trace, window, augmentation) drawn from ``pool``.

    With ``min_busy`` > 0 a window qualifies only when, served alone by a simulated SSD
    (``params``), at least that share of the reads of each half meet a garbage-collection busy
    period: the windows have something to predict (the chapter's windows are chosen long enough
    to show tail latencies). The check uses the simulator's ground truth, never a label or a
    model; candidates that fail are redrawn (at most 200 draws per window)."""
    if not pool:
        raise InvalidArgumentError("no traces to draw windows from")
    if window_ios < 100:
        raise InvalidArgumentError(f"window_ios must be at least 100, got {window_ios}")
    if pairs < 1:
        raise InvalidArgumentError(f"pairs (windows) must be at least 1, got {pairs}")
    if not 0 <= min_busy < 1:
        raise InvalidArgumentError(f"min_busy must be in [0, 1), got {min_busy}")
    shortest = min(pool, key=len)
    if window_ios > len(shortest):
        # A window longer than a trace would silently be the whole trace (and every draw of it
        # the same window): refuse instead, naming the largest window every trace holds.
        raise InvalidArgumentError(
            f"window_ios {window_ios} is larger than trace {shortest.name or '(unnamed)'} "
            f"({len(shortest)} I/Os); use at most {len(shortest)}"
        )
    if window_ios == len(shortest) and pairs > 1:
        raise InvalidArgumentError(
            f"window_ios {window_ios} is the whole of trace {shortest.name or '(unnamed)'}: "
            f"every one of the {pairs} windows drawn from it would be the same; use fewer I/Os "
            "or one pair"
        )
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(pairs):
        group = []
        for _r in range(replicas):
            # Redraw (bounded) until both halves hold enough reads to train and to measure.
            for _try in range(200 if min_busy > 0 else 100):
                t = pool[int(rng.integers(len(pool)))]
                n = min(window_ios, len(t))
                start = int(rng.integers(0, len(t) - n + 1))
                reads = t.is_read[start : start + n]
                aug = (
                    AUGMENTATIONS[int(rng.integers(len(AUGMENTATIONS)))][0]
                    if augmentations
                    else "none"
                )
                if min(reads[: n // 2].sum(), reads[n // 2 :].sum()) < MIN_READS:
                    continue
                w = augment(t.slice(start, start + n), aug)
                if min_busy <= 0 or busy_share(w, params) >= min_busy:
                    break
            else:
                raise InvalidArgumentError(
                    f"no window of {window_ios} I/Os with {MIN_READS} reads in each half"
                    + (f" and {min_busy:.0%} busy reads" if min_busy > 0 else "")
                )
            group.append((w, Window(t.name, start, aug)))
        out.append(group)
    return out


def busy_share(w: Trace, params: dict | None = None) -> float:
    """The smaller, over the two halves of ``w``, of the share of reads that meet a busy period
    when the half is served alone (the halves are replayed as :func:`evaluate_pair` does)."""
    h = len(w) // 2
    shares = []
    for i, part in enumerate((w.slice(0, h), w.slice(h, len(w)))):
        r = replay(part, params, i)
        busy = np.asarray(r["gc_pages"])[np.asarray(part.is_read, dtype=bool)] > 0
        shares.append(float(busy.mean()) if len(busy) else 0.0)
    return min(shares)


def train_rows(group: list[tuple[Trace, Window]], params: dict | None, seed: int) -> list[dict]:
    """Each replica's training half (the first half of its window) served alone: its read rows."""
    out = []
    for i, (t, _) in enumerate(group):
        half = t.slice(0, len(t) // 2)
        out.append(hd.read_rows(replay(half, params, seed + i), half))
    return out


@dataclass
class TrainingHalves:
    """The training halves of several windows' replicas, each with the rule that labels it."""

    rules: list[list[hd.LabelRule]]  # per window, per replica
    rows: list[dict] = field(default_factory=list)  # every replica's rows, in order
    rules_flat: list[hd.LabelRule] = field(default_factory=list)  # the rule of each of `rows`


def training_halves(
    groups: list[list[tuple[Trace, Window]]],
    params: dict | None,
    seed: int,
    rule: hd.LabelRule,
    rule_search: bool = False,
    on_window=None,
) -> TrainingHalves:
    """Serves each window's training halves alone (`train_rows`, seeded `seed + i` for window
    i) and labels each by `rule`, or by the rule `hd.choose_rule` finds for it (`rule_search`).
    `on_window()` is called after each window (a progress bar's update)."""
    out = TrainingHalves(rules=[])
    for i, g in enumerate(groups):
        tr = train_rows(g, params, seed + i)
        rs = [hd.choose_rule(r, seed=seed)[0] if rule_search else rule for r in tr]
        out.rules.append(rs)
        out.rows += tr
        out.rules_flat += rs
        if on_window is not None:
            on_window()
    return out


def device_model(
    rows: list[dict], rules: list[hd.LabelRule], pipeline: hd.Pipeline = hd.DEFAULT_PIPELINE
) -> bytes:
    """One model for a kind of device, trained on the training halves of many windows served by
    it (each labelled by its own rule against its own medians), never on a held-out half."""
    labels = np.concatenate(
        [hd.label_periods(r["size"], r["latency_ns"], rule) for r, rule in zip(rows, rules)]
    )
    return hd.train(hd.concat_rows(rows), pipeline, labels=labels, allow_one_class=True).to_bytes()


#: Quantiles (percent) kept per policy and window: enough to draw a latency CDF from the results
#: file, dense in the tail.
CDF_PERCENTILES = (
    *range(0, 90, 5),
    *range(90, 99),
    *(99 + i / 10 for i in range(10)),
    99.95,
    100,
)


def latency_quantiles(lat_ns: np.ndarray) -> list[float]:
    """Read latency (µs) at :data:`CDF_PERCENTILES`."""
    if not len(lat_ns):
        return []
    return [float(v) for v in np.percentile(lat_ns / 1e3, CDF_PERCENTILES)]


def _latency_summary(lat_ns: np.ndarray) -> dict[str, float]:
    us = lat_ns / 1e3
    return {
        "mean": float(us.mean()),
        "p50": float(np.percentile(us, 50)),
        "p90": float(np.percentile(us, 90)),
        "p99": float(np.percentile(us, 99)),
        "p999": float(np.percentile(us, 99.9)),
    }


def evaluate_pair(
    group: list[tuple[Trace, Window]],
    *,
    params: dict | None = None,
    seed: int = 0,
    pipeline: hd.Pipeline = hd.DEFAULT_PIPELINE,
    ladder: bool = False,
    joints: tuple[int, ...] = (),
    policies: tuple[str, ...] = POLICIES,
    model: bytes | None = None,
    rules: list[hd.LabelRule] | None = None,
    rank_tie: float = RANK_TIE,
    slow_factor: float = SLOW_FACTOR,
    live_model: bytes | None = None,
    probe_reads_us: float = PROBE_READS_US,
    live_rank_tie: float = LIVE_RANK_TIE,
    write_clock: tuple[int, int, float, float] | None = None,
    unknown_phase: bool = False,
) -> PairResult:
    """Trains per-device models on the first halves and compares the policies on the second.
    ``model`` (a weight file's bytes), when given, is every replica's Heimdall model instead.
    ``rules`` (one per replica, e.g. from :func:`attune.io.heimdall.choose_rule` on the training
    half) replace ``pipeline.rule`` for labelling and training. ``rank_tie`` is the logit margin
    within which ``heimdall-rank`` counts replicas as tied (0: the replicas predicted fast);
    ``slow_factor`` how many times a replica predicted slow counts in ``heimdall-cost``.
    ``live_model`` is every replica's live model (:data:`LIVE_POLICIES`); without it each
    replica's is trained on its training half, as the chapter's model is. ``write_clock`` is the
    clock of :data:`CLOCK_POLICIES`; without it one is fitted on this group's training halves
    (:func:`attune.io.heimdall.fit_write_clock`); none fitted: those policies run without.
    ``unknown_phase``: every replica of every policy has been written a random number of bytes
    (seeded by ``seed``) before the evaluation half, so its collection phase is unknown, and the
    clock is anchored (``route(..., clock_anchor_us=...)``) at completed reads slower than the
    period labelling's high-latency threshold (``rule.lat_factor`` × the training halves' median
    read latency) instead of counting from an empty device."""
    res = PairResult([w for _, w in group])
    train_halves, test_halves = [], []
    for t, _ in group:
        h = len(t) // 2
        train_halves.append(t.slice(0, h))
        test_halves.append(t.slice(h, len(t)))
    heimdall_models, linnos_models, live_models, train_lat = [], [], [], []
    train_labels = []
    want_live = any(p in LIVE_POLICIES for p in policies)
    first_rows = None
    for i, t in enumerate(train_halves):
        rows = hd.read_rows(replay(t, params, seed + i), t)
        if len(rows["size"]) < 20:
            raise InvalidArgumentError(
                f"window {i} has {len(rows['size'])} reads in its training half; need 20"
            )
        train_lat.append(rows["latency_ns"])
        rule = rules[i] if rules else pipeline.rule
        train_labels.append(hd.label_periods(rows["size"], rows["latency_ns"], rule))
        p_i = hd.Pipeline(
            labelling=pipeline.labelling,
            features=pipeline.features,
            noise_filter=pipeline.noise_filter,
            joint=pipeline.joint,
            rule=rule,
            epochs=pipeline.epochs,
            seed=pipeline.seed,
        )
        if i == 0:
            pipeline = p_i
        heimdall_models.append(
            model if model is not None else hd.train(rows, p_i, allow_one_class=True).to_bytes()
        )
        if "linnos" in policies:
            linnos_models.append(
                hd.train_linnos(rows, seed=pipeline.seed, allow_one_class=True).to_bytes()
            )
        if want_live:
            live_models.append(
                live_model
                if live_model is not None
                else hd.train(
                    rows, dataclasses.replace(p_i, features="live", joint=1), allow_one_class=True
                ).to_bytes()
            )
        if i == 0:
            first_rows = rows
    # Accuracy on replica 0's held-out half served alone.
    test0 = test_halves[0]
    rows = hd.read_rows(replay(test0, params, seed + 100), test0)
    # Held-out labels are measured against the training half's medians (the reference the
    # deployed model's thresholds came from), not re-normalised on the held-out half.
    ref = hd.label_medians(first_rows["size"], first_rows["latency_ns"]) if first_rows else None
    period = hd.label_periods(rows["size"], rows["latency_ns"], pipeline.rule, reference=ref)
    res.slow_fraction = float(period.mean()) if len(period) else 0.0
    res.busy_fraction = float(rows["busy"].mean()) if len(period) else 0.0
    res.auc_truth_vs_labels = hd.roc_auc(period, rows["busy"].astype(np.float64))
    x1 = rows["features"]
    xl = hd.live_features(rows)
    if pipeline.joint == 1:
        s = hd.quantised_scores(heimdall_models[0], xl if pipeline.features == "live" else x1)
        res.auc_period = hd.roc_auc(period, s)
        res.auc_busy = hd.roc_auc(rows["busy"], s)
    if live_models:
        s = hd.quantised_scores(live_models[0], xl)
        res.auc_period_live = hd.roc_auc(period, s)
        res.auc_busy_live = hd.roc_auc(rows["busy"], s)
    if linnos_models:
        s = hd.quantised_scores(linnos_models[0], hd.linnos_digits(x1))
        res.auc_linnos_period = hd.roc_auc(period, s)
    if ladder and first_rows is not None:
        for stage, lab, feats, filt in LADDER:
            p = hd.Pipeline(
                labelling=lab,
                features=feats,
                noise_filter=filt,
                rule=pipeline.rule,
                epochs=pipeline.epochs,
                seed=pipeline.seed,
            )
            m = hd.train(first_rows, p, allow_one_class=True)
            x = {"basic": hd.basic_features(x1), "live": xl}.get(feats, x1)
            res.ladder_auc[stage] = hd.roc_auc(period, m.predict_proba(x))
    for j in joints:
        p = hd.Pipeline(joint=j, rule=pipeline.rule, epochs=pipeline.epochs, seed=pipeline.seed)
        m = hd.train(first_rows, p, allow_one_class=True) if first_rows is not None else None
        if m is None:
            continue
        xj, yj = hd.joint_features(x1, period, j)
        res.joint_auc[j] = hd.roc_auc(yj, hd.quantised_scores(m.to_bytes(), xj))
    # Latency of every policy on the second halves.
    timeout = int(np.percentile(np.concatenate(train_lat), 98))
    if write_clock is None and any(p in CLOCK_POLICIES for p in policies):
        write_clock = hd.fit_write_clock(train_halves, train_labels)[0]
    res.write_clock = list(write_clock) if write_clock is not None else None
    rt = route
    lat_all = np.concatenate(train_lat) if train_lat else np.zeros(0)
    # The slow-read threshold: the period labelling's high-latency threshold on the training
    # halves. It anchors the unknown-phase clock and times the risky reads' backups.
    slow_us = pipeline.rule.lat_factor * float(np.median(lat_all)) / 1e3 if len(lat_all) else 0.0
    if unknown_phase:
        rng = np.random.default_rng([seed, 0xA6ED])
        aged = [int(b) for b in rng.integers(0, 1 << 40, size=len(test_halves))]
        rt = functools.partial(route, aged_bytes=aged, clock_anchor_us=slow_us)
    # ``heimdall-live-expect*``: how many times longer a read labelled slow takes than one
    # labelled fast on the training halves (pooled), the weight of the slow probability.
    slow_lat = [lat[lab == 1] for lat, lab in zip(train_lat, train_labels)]
    fast_lat = [lat[lab == 0] for lat, lab in zip(train_lat, train_labels)]
    slow_mean = float(np.mean(np.concatenate(slow_lat))) if sum(map(len, slow_lat)) else 0.0
    fast_mean = float(np.mean(np.concatenate(fast_lat))) if sum(map(len, fast_lat)) else 0.0
    res.expect_factor = max(1.0, slow_mean / fast_mean) if fast_mean > 0 else 1.0
    for pol in policies:
        models = live_models if pol in LIVE_POLICIES else heimdall_models
        probing = probe_reads_us if pol in PROBE_POLICIES else 0.0
        clock = write_clock if pol in CLOCK_POLICIES else None
        # Every clock setting explicit: ``route``'s defaults for an unknown phase (voted,
        # every read hedged) are what the ``-voted-hedged-all`` policies measure.
        counted: dict = {"clock_vote": False, "hedge_delay_us": 0.0, "hedge_every_read": False}
        if pol in REFINED_POLICIES:
            counted.update(CLOCK_REFINEMENTS)
        if pol in TOLD_POLICIES:
            counted["clock_anchor_us"] = 0.0
        if pol in VOTED_POLICIES:
            counted["clock_vote"] = True
        if pol in HEDGED_POLICIES and slow_us > 0:
            counted["hedge_delay_us"] = HEDGE_DELAY_FACTOR * slow_us
            counted["hedge_margin"] = HEDGE_MARGIN if pol in LIVE_POLICIES else None
            counted["hedge_every_read"] = pol.endswith("-hedged-all")
        if pol in ("heimdall", "heimdall-live"):
            r = rt(test_halves, "model", params, seed, models=models)
        elif pol in (
            "heimdall-rank",
            "heimdall-live-rank",
            "heimdall-live-rank-probe",
            "heimdall-live-rank-clock",
            "heimdall-live-rank-probe-clock",
            "heimdall-live-rank-clock-refined",
            "heimdall-live-rank-clock-told",
            "heimdall-live-rank-clock-voted",
            "heimdall-live-rank-clock-voted-hedged",
            "heimdall-live-rank-clock-voted-hedged-all",
        ):
            r = rt(
                test_halves,
                "model-rank",
                params,
                seed,
                models=models,
                tie=live_rank_tie if pol in LIVE_POLICIES else rank_tie,
                probe_reads_us=probing,
                write_clock=clock,
                **counted,
            )
        elif pol in (
            "heimdall-live-expect",
            "heimdall-live-expect-clock-refined",
        ):
            r = rt(
                test_halves,
                "model-expect",
                params,
                seed,
                models=models,
                slow_factor=res.expect_factor,
                write_clock=clock,
                **counted,
            )
        elif pol in ("heimdall-cost", "heimdall-live-cost", "heimdall-live-cost-probe"):
            r = rt(
                test_halves,
                "model-cost",
                params,
                seed,
                models=models,
                slow_factor=slow_factor,
                probe_reads_us=probing,
            )
        elif pol in (
            "c3-probe",
            "c3-clock",
            "c3-clock-refined",
            "c3-clock-told",
            "c3-clock-voted",
            "c3-clock-voted-hedged",
            "c3-clock-voted-hedged-all",
        ):
            r = rt(
                test_halves,
                "c3",
                params,
                seed,
                probe_reads_us=probing,
                write_clock=clock,
                **counted,
            )
        elif pol == "heimdall-home":
            r = rt(test_halves, "model-home", params, seed, models=heimdall_models)
        elif pol == "linnos":
            r = rt(test_halves, "model", params, seed, models=linnos_models)
        elif pol == "hedging":
            r = rt(test_halves, "hedging", params, seed, timeout_ns=max(timeout, 1))
        else:
            r = rt(test_halves, pol, params, seed)
        lat = np.asarray(r["read_latency_ns"], dtype=np.float64)
        res.latency_us[pol] = _latency_summary(lat) if len(lat) else {}
        res.redirected[pol] = int(r["redirected"])
        res.probe_share[pol] = int(r["probes"]) / max(len(lat), 1)
        res.backup_share[pol] = int(r["hedged"]) / max(len(lat), 1)
        res.quantiles_us[pol] = latency_quantiles(lat)
        stats = r["device_stats"]
        # The clients' reads only: probe reads are in the devices' counters too.
        reads = sum(int(d["reads"]) for d in stats) - int(r["probes"])
        gc_reads = sum(int(d["gc_reads"]) for d in stats) - int(r["probe_gc_reads"])
        res.gc_share[pol] = gc_reads / max(reads, 1)
        probes = r.get("device_probes", [0] * len(stats))
        res.served_share[pol] = [
            (int(d["reads"]) - int(p)) / max(reads, 1) for d, p in zip(stats, probes)
        ]
    return res


def best_baseline(r: PairResult) -> tuple[str, float]:
    """The baseline with the lowest mean read latency in one window (Heimdall's policies and the
    bounds excluded), and that mean."""
    base = [
        p
        for p in r.latency_us
        if p not in (*HEIMDALL_POLICIES, *BOUND_POLICIES, *REFERENCE_POLICIES)
    ]
    if not base:
        return "", float("nan")
    p = min(base, key=lambda p: r.latency_us[p]["mean"])
    return p, r.latency_us[p]["mean"]


def summarize(results: list[PairResult]) -> dict:
    """Medians over windows: latency per policy, Heimdall's reduction against the best baseline,
    accuracy."""
    if not results:
        return {}
    pols = list(results[0].latency_us)
    out: dict = {"windows": len(results), "policies": {}}
    for p in pols:
        out["policies"][p] = {
            k: float(np.median([r.latency_us[p][k] for r in results if r.latency_us.get(p)]))
            for k in ("mean", "p50", "p90", "p99", "p999")
        }
    others = (*HEIMDALL_POLICIES, *BOUND_POLICIES, *REFERENCE_POLICIES)
    base = [p for p in pols if p not in others]
    for pol in [p for p in pols if p in others]:
        if not base:
            break
        red = []
        p99_vs_hedging = []
        for r in results:
            best = best_baseline(r)[1]
            red.append(1 - r.latency_us[pol]["mean"] / best)
            if "hedging" in r.latency_us:
                p99_vs_hedging.append(r.latency_us[pol]["p99"] / r.latency_us["hedging"]["p99"])
        out[f"{pol}_mean_reduction_vs_best_baseline_median"] = float(np.median(red))
        if p99_vs_hedging:
            out[f"{pol}_p99_over_hedging_median"] = float(np.median(p99_vs_hedging))
    out["gc_share_median"] = {
        p: float(np.median([r.gc_share[p] for r in results if p in r.gc_share])) for p in pols
    }
    out["backup_share_median"] = {
        p: float(np.median([r.backup_share.get(p, 0.0) for r in results])) for p in pols
    }
    for k in (
        "auc_period",
        "auc_busy",
        "auc_linnos_period",
        "auc_period_live",
        "auc_busy_live",
        "auc_truth_vs_labels",
        "busy_fraction",
        "slow_fraction",
    ):
        vals = [getattr(r, k) for r in results if not np.isnan(getattr(r, k))]
        out[k + "_median"] = float(np.median(vals)) if vals else float("nan")
    if results[0].ladder_auc:
        out["ladder_auc_median"] = {
            s: float(np.nanmedian([r.ladder_auc[s] for r in results]))
            for s in results[0].ladder_auc
        }
    if results[0].joint_auc:
        out["joint_auc_median"] = {
            j: float(np.nanmedian([r.joint_auc[j] for r in results])) for j in results[0].joint_auc
        }
    return out


# ---------------------------------------------------------------- drift
@dataclass
class DriftResult:
    """One long trace served by one device, cut into intervals: the model's ROC-AUC per interval
    with and without retraining, and the intervals where retraining fired."""

    trace: str
    interval_s: float
    auc_static: list[float] = field(default_factory=list)
    auc_retrain: list[float] = field(default_factory=list)
    retrained_at: list[int] = field(default_factory=list)
    reads: list[int] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def drift_run(
    trace: Trace,
    *,
    params: dict | None = None,
    seed: int = 0,
    interval_s: float = 60.0,
    threshold: float = 0.8,
    min_reads: int = 50,
    min_slow: int = 10,
    pipeline: hd.Pipeline = hd.DEFAULT_PIPELINE,
) -> DriftResult:
    """The chapter's retraining policy (§3.7) on one trace served alone by one simulated SSD.

    The trace is cut into intervals of ``interval_s`` of trace time (intervals with fewer than
    ``min_reads`` reads merge into the next). The first interval trains the model. Every later
    interval is labelled on its own (period labels against its own medians) and scored twice: by
    the model trained once (``auc_static``) and by the retrained model (``auc_retrain``); when the
    retrained model's ROC-AUC falls below ``threshold`` it is retrained on that interval (the last
    one before the trigger) and the next interval is scored by the new model; an interval with
    fewer than ``min_slow`` slow reads is too thin to retrain on and keeps the model. Accuracy is
    ROC-AUC,
    the metric of the rest of the pipeline (the chapter says "accuracy"; with 5-20 % slow reads
    plain accuracy would reward admitting everything). Intervals without both classes score NaN
    and never trigger. Deterministic.
    """
    if not interval_s > 0:
        raise InvalidArgumentError(f"interval_s must be positive, got {interval_s}")
    if not 0 < threshold < 1:
        raise InvalidArgumentError(f"threshold must be in (0, 1), got {threshold}")
    rows = hd.read_rows(replay(trace, params, seed), trace)
    ts = np.asarray(trace.timestamp_ns, dtype=np.float64)[np.asarray(trace.is_read, dtype=bool)]
    bucket = (ts // (interval_s * 1e9)).astype(np.int64)
    cuts, start, count = [], 0, 0
    for i in range(1, len(bucket) + 1):
        count += 1
        if (i == len(bucket) or bucket[i] != bucket[i - 1]) and count >= min_reads:
            cuts.append((start, i))
            start, count = i, 0
    if len(cuts) < 2:
        raise InvalidArgumentError(
            f"trace {trace.name!r} has {len(cuts)} interval(s) of {interval_s} s with "
            f"{min_reads} reads; drift needs at least 2"
        )
    res = DriftResult(trace.name, interval_s)

    def part(a: int, b: int) -> dict:
        return {k: v[a:b] for k, v in rows.items()}

    first = part(*cuts[0])
    static = hd.train(first, pipeline, allow_one_class=True)
    current = static
    for k, (a, b) in enumerate(cuts[1:], start=1):
        seg = part(a, b)
        y = hd.label_periods(seg["size"], seg["latency_ns"], pipeline.rule)
        res.reads.append(b - a)
        res.auc_static.append(hd.roc_auc(y, static.predict_proba(seg["features"])))
        auc = hd.roc_auc(y, current.predict_proba(seg["features"]))
        res.auc_retrain.append(auc)
        if not np.isnan(auc) and auc < threshold and int(y.sum()) >= min_slow:
            current = hd.train(seg, pipeline, allow_one_class=True)
            res.retrained_at.append(k)
    return res
