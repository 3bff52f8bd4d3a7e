"""attune.io: a simulated SSD, block traces, replica routing and Heimdall's learned admission.

* :func:`load_trace` / :class:`Trace`: MSR-Cambridge, CloudPhysics and Attune block traces.
* :func:`replay`: one trace on one simulated SSD (``attune-io``, deterministic by seed).
* :mod:`attune.io.heimdall`: labelling, noise filters, features, the numpy-trained network and
  its checksummed weight file.
* :func:`route`: two or three replicas, reads routed by a policy.
* :mod:`attune.io.evaluate`: Heimdall against the baselines over random windows.

Design notes: ``docs/ssd-sim.md``, ``docs/heimdall.md``.
"""

from __future__ import annotations

import math
import os

import numpy as np

from attune import _native
from attune.io.trace import (
    FORMATS,
    RERATE_RANGE,
    Trace,
    check_factor,
    check_path,
    check_seed,
    check_trace,
    load_trace,
    parse_trace,
    synthetic_trace,
)

__all__ = [
    "DEVICE_PRESETS",
    "FORMATS",
    "HEDGE_DELAY_FACTOR",
    "LOAD_LIMIT",
    "POLICIES",
    "Trace",
    "device_params",
    "load_trace",
    "parse_trace",
    "replay",
    "replay_direct",
    "route",
    "ssd_params",
    "synthetic_trace",
    "write_clock_flags",
    "write_load",
]

#: Named simulated devices: SSD parameter overrides on top of the defaults (design note
#: ``docs/ssd-sim.md``). ``default`` is the mid-range NVMe model whose busy periods occupy half of
#: the chips (a read is slow only if it lands on one of them); ``device-gc`` is the same drive
#: whose garbage collection stalls every chip at once (busy periods are device-wide, the premise
#: of Heimdall's period labels).
DEVICE_PRESETS: dict[str, dict[str, str]] = {
    "default": {},
    "device-gc": {"gc_chip_fraction": "1.0"},
}


def device_params(device: str = "default", overrides: dict | None = None) -> dict[str, str]:
    """A preset's SSD parameter overrides with ``overrides`` on top (unknown preset:
    :class:`attune.InvalidArgumentError`)."""
    if device not in DEVICE_PRESETS:
        from attune.errors import InvalidArgumentError

        raise InvalidArgumentError(
            f"unknown device preset {device!r}; valid: {', '.join(DEVICE_PRESETS)}"
        )
    return {**DEVICE_PRESETS[device], **(overrides or {})}


#: Routing policies of :func:`route` (``model``, ``model-home`` and ``model-rank`` take one weight
#: file per replica; ``model-home`` keeps a read every replica declines on its own device;
#: ``model-rank`` scores every replica and lets C3 pick among the least predicted slow;
#: ``model-cost`` weighs each replica's queue by the model's prediction; ``oracle``
#: is a bound that serves each read on copies of every replica).
POLICIES = (
    "baseline",
    "random",
    "hedging",
    "c3",
    "model",
    "model-home",
    "model-rank",
    "model-cost",
    "oracle",
)


def _number(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def ssd_params(params: dict | None = None) -> dict[str, int | float]:
    """Every SSD parameter (defaults, overridden by ``params``), validated, as numbers (``int``
    for counts and sizes, ``float`` for times and fractions); a bad one raises
    :class:`attune.InvalidArgumentError` naming it. The result can be passed back as
    ``params``."""
    return {k: _number(v) for k, v in _native.io_ssd_params(_check_params(params))}


#: Estimated utilisation of the chips under garbage collection (see :func:`write_load`) above
#: which the simulated device's queues grow without bound: calibrated on the default device and
#: the synthetic trace, whose write latencies stay at tens of microseconds at 0.3 × its rate
#: (estimate 0.52) and grow with the trace's length from 0.4 × (estimate 0.69).
LOAD_LIMIT = 0.6


def write_load(trace: Trace, params: dict | None = None) -> dict[str, float]:
    """How hard ``trace`` drives the simulated device: ``write_bytes_per_s`` (bytes of its
    writes over its duration), ``gc_duty`` (the share of time a collecting chip spends in a busy
    period: ``gc_duration_us`` per ``gc_every_bytes`` written, at most 1) and ``chip_load``, the
    estimated utilisation of a collecting chip: the flushes program ``page_bytes`` pages
    round-robin on every chip (``program_page_us`` each), and reads cost ``read_page_us`` per
    page touched, inflated by the mean of ``gc_read_inflation_min..max`` for the ``gc_duty``
    share. A flush ends when its slowest chip does, so a collecting chip sets the pace; above
    :data:`LOAD_LIMIT` the write buffer fills for good and every later I/O waits behind flushes.
    ``rerate`` is the arrival-rate factor that brings ``chip_load`` to half of the limit (1.0
    when it is already below the limit). All three are 0 for a trace whose I/Os share one
    timestamp."""
    p = ssd_params(params)
    t = check_trace(trace)
    secs = t.duration_ns / 1e9
    if secs <= 0:
        return {"write_bytes_per_s": 0.0, "gc_duty": 0.0, "chip_load": 0.0, "rerate": 1.0}
    chips = p["channels"] * p["chips_per_channel"]
    is_read = np.asarray(t.is_read)
    size = np.asarray(t.size, dtype=np.float64)
    unit = float(p["mapping_bytes"])
    page = float(p["page_bytes"])
    off = np.asarray(t.offset, dtype=np.float64)[is_read]
    end = off + np.maximum(np.ceil(size[is_read] / unit), 1.0) * unit
    read_pages = float((np.ceil(end / page) - np.floor(off / page)).sum())
    written = float(size[~is_read].sum())
    inflation = (p["gc_read_inflation_min"] + p["gc_read_inflation_max"]) / 2

    # Per unit of the rate factor f: programming (prog), reads (reads) and the GC duty (gc).
    w1 = written / secs
    gc = w1 * p["gc_duration_us"] * 1e-6 / p["gc_every_bytes"]
    prog = w1 / page / chips * p["program_page_us"] * 1e-6
    reads = read_pages / secs / chips * p["read_page_us"] * 1e-6
    duty = min(1.0, gc)
    chip_load = prog + reads * (1.0 + duty * (inflation - 1.0))
    rerate = 1.0
    if chip_load > LOAD_LIMIT:
        # load(f) = (prog + reads) f + reads (inflation - 1) gc f^2 while gc f < 1, then
        # (prog + reads inflation) f: increasing in f, so its level LOAD_LIMIT / 2 has one root.
        target = LOAD_LIMIT / 2
        a, b = reads * (inflation - 1.0) * gc, prog + reads
        rerate = 2 * target / (b + math.sqrt(b * b + 4 * a * target))
        if gc * rerate >= 1.0:
            rerate = target / (prog + reads * inflation)
    return {
        "write_bytes_per_s": written / secs,
        "gc_duty": duty,
        "chip_load": chip_load,
        "rerate": rerate,
    }


def _check_params(params: object) -> dict | None:
    if params is not None and not isinstance(params, dict):
        from attune.errors import InvalidArgumentError

        hint = (
            f" (a device preset? use device_params({params!r}))" if isinstance(params, str) else ""
        )
        raise InvalidArgumentError(
            f"params must be a dict of SSD parameter names to values or None, not "
            f"{type(params).__name__}{hint}"
        )
    return params


def replay(trace: Trace, params: dict | None = None, seed: int = 0) -> dict:
    """Serves ``trace`` on one simulated SSD. Returns ``latency_ns``, ``queue_len``, ``gc_pages``
    (per I/O), ``features`` (little-endian f32 bytes, 11 per I/O) and ``stats``. ``seed`` is an
    integer in 0..2**64-1."""
    return _native.io_replay(check_trace(trace).columns(), _check_params(params), check_seed(seed))


def replay_direct(
    trace: Trace,
    path: str | bytes | os.PathLike,
    file_bytes: int = 256 << 20,
    *,
    pace: bool = False,
    speed: float = 1.0,
    direct: bool = True,
    overwrite: bool = False,
) -> dict:
    """Replays ``trace`` against the real file ``path`` (created and filled when its size
    differs) with ``O_DIRECT``, one I/O at a time. The replay writes into the file, so an
    existing non-empty ``path`` raises :class:`attune.InvalidArgumentError` unless
    ``overwrite=True``. Returns ``issue_ns``, ``latency_ns`` and
    ``bytes`` per I/O (``attune-io``'s ``direct`` module), and ``memory_backed``: True when
    ``path`` is on tmpfs or ramfs, where the latencies are memory copies, not a disk's (the replay
    still runs; the CLI prints a warning). A file system without ``O_DIRECT`` raises
    :class:`attune.StorageIOError`; ``direct=False`` goes through the page cache. ``path`` is
    a ``str``, ``bytes`` or ``os.PathLike``; ``file_bytes`` at least 1 MiB; ``speed`` (the
    pacing factor) in 0.001..1000."""
    from attune.errors import InvalidArgumentError

    trace = check_trace(trace)
    p = check_path(path, "path")
    if isinstance(file_bytes, bool) or not isinstance(file_bytes, (int, np.integer)):
        raise InvalidArgumentError(f"file_bytes must be an integer, got {file_bytes!r}")
    if not 1 << 20 <= file_bytes < 2**63:
        raise InvalidArgumentError(
            f"file_bytes must be at least 1 MiB (1048576) and below 2**63, got {file_bytes}"
        )
    speed = check_factor("speed", speed, RERATE_RANGE)
    return _native.io_replay_direct(
        trace.columns(), p, int(file_bytes), pace, speed, direct, overwrite
    )


def write_clock_flags(trace: Trace, write_clock: tuple[int, int, float, float]) -> np.ndarray:
    """For every I/O of ``trace``, whether the write clock ``(flush_bytes, gc_every_bytes,
    delay_us, busy_us)`` predicts the device busy when it arrives, counting the writes before it
    (``attune_io::clock``): what a router sees, for fitting the clock on training halves."""
    return np.asarray(_native.io_write_clock_flags(trace.columns(), write_clock), dtype=bool)


#: With an unknown phase, a read still unanswered after this many times the clock's anchor
#: latency (the slow-read threshold) is read again from a replica the clock does not predict
#: busy (``route``'s default; docs/heimdall.md, item 15).
HEDGE_DELAY_FACTOR = 2.0


def _check_route_ints(write_clock, aged_bytes, clock_vote_half_life) -> None:
    """`route`'s integer arguments, checked here so that a bad one is an
    ``InvalidArgumentError`` naming it rather than the binding's OverflowError or TypeError."""
    from attune.errors import InvalidArgumentError

    def whole(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**64

    if write_clock is not None and (
        not isinstance(write_clock, (tuple, list))
        or len(write_clock) != 4
        or not (whole(write_clock[0]) and whole(write_clock[1]))
        or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in write_clock[2:])
    ):
        raise InvalidArgumentError(
            "write_clock must be (flush_bytes, gc_every_bytes, delay_us, busy_us): two whole "
            f"numbers of bytes and two numbers of µs, got {write_clock!r}"
        )
    if aged_bytes is not None and (
        not isinstance(aged_bytes, (list, tuple)) or not all(whole(b) for b in aged_bytes)
    ):
        raise InvalidArgumentError(
            f"aged_bytes must be a list of whole numbers of bytes in [0, 2**64), got {aged_bytes!r}"
        )
    if not (whole(clock_vote_half_life) and clock_vote_half_life < 2**32):
        raise InvalidArgumentError(
            "clock_vote_half_life must be a whole number of reads in [0, 2**32), got "
            f"{clock_vote_half_life!r}"
        )


def _check_route_effect(
    write_clock, clock_vote, clock_vote_half_life, hedge_delay_us, hedge_margin, hedge_every_read
) -> None:
    """Refuses `route` settings that cannot take effect (after its defaults are resolved), so
    that a backup or a vote asked for is never silently not done."""
    from attune.errors import InvalidArgumentError

    if write_clock is None and clock_vote:
        raise InvalidArgumentError(
            "clock_vote=True needs a write_clock (and clock_anchor_us > 0 for a phase to vote on)"
        )
    if write_clock is None and clock_vote_half_life:
        raise InvalidArgumentError(
            "clock_vote_half_life needs a voted clock: a write_clock and clock_anchor_us > 0"
        )
    delay = hedge_delay_us if isinstance(hedge_delay_us, (int, float)) else 0.0
    if hedge_every_read and not delay > 0:
        raise InvalidArgumentError(
            "hedge_every_read=True needs hedge_delay_us > 0 (how long a read waits before its "
            "backup is sent)"
        )
    if delay > 0 and write_clock is None and hedge_margin is None and not hedge_every_read:
        raise InvalidArgumentError(
            f"hedge_delay_us={hedge_delay_us} would hedge no read: backups go to reads the router "
            "is unsure about, which needs a write_clock with clock_anchor_us > 0, a hedge_margin "
            "with a model policy, or hedge_every_read=True"
        )


def route(
    traces: list[Trace],
    policy: str,
    params: dict | None = None,
    seed: int = 0,
    *,
    timeout_ns: int = 0,
    models: list[bytes] | None = None,
    tie: float = 0.0,
    slow_factor: float = 10.0,
    probe_models: list[bytes] | None = None,
    probe_reads_us: float = 0.0,
    probe_read_size: int = 4096,
    write_clock: tuple[int, int, float, float] | None = None,
    clock_anchor_us: float = 0.0,
    aged_bytes: list[int] | None = None,
    clock_anchor_writes: bool = False,
    clock_anchor_gate: bool = False,
    clock_vote: bool | None = None,
    hedge_delay_us: float | None = None,
    hedge_margin: float | None = None,
    hedge_every_read: bool | None = None,
    clock_vote_half_life: int = 0,
) -> dict:
    """Replicas serving ``traces`` (trace ``i`` issued at device ``i``); reads routed by
    ``policy`` (``baseline``, ``random``, ``hedging``, ``c3``, ``model``, ``model-home``,
    ``model-rank``, ``model-cost``, ``model-expect``, ``oracle``; ``tie`` is ``model-rank``'s
    logit margin within which replicas count as tied, ``slow_factor`` ``model-cost``'s multiplier
    of a replica predicted slow and ``model-expect``'s slow-to-fast latency ratio: it sends the
    read where C3's score × (1 + p (slow_factor − 1)) is least, ``p`` the model's slow
    probability, 1 where the write clock predicts the replica busy). Returns ``read_latency_ns``, ``home``, ``redirected``, ``hedged``,
    ``inferences``, ``device_stats``; with ``probe_models`` (one weight file per replica) also
    ``probe``: per read and replica, the model's margin, C3's score, the queue, the history's age
    and what the replica would have served the read in (see ``route::probe``).
    ``probe_reads_us`` > 0 sends a probe read of ``probe_read_size`` bytes to a replica with no
    read completed or in flight for that many µs (the result's ``probes`` counts them; its
    latency is no client's, its load on the device is simulated; ``device_probes`` counts them
    per replica, and each replica's ``device_stats`` reads include its probes). ``write_clock`` =
    ``(flush_bytes, gc_every_bytes, delay_us, busy_us)`` (e.g. from
    :func:`attune.io.heimdall.fit_write_clock`) counts the bytes written to each replica and
    predicts its garbage collection: C3 and the model policies avoid a replica it predicts busy
    (``attune_io::clock``; not with ``probe_models``). ``clock_anchor_us`` > 0: the clock starts
    with no phase and anchors at each completed read at least that slow outside its predicted
    busy period, instead of counting from an empty device. ``aged_bytes`` (one per replica): each
    replica has been written that many bytes before the window, so its collection phase is
    unknown (``route::ClockPhase``). ``clock_anchor_writes``: at an anchor the clock also counts
    the writes sent while the anchoring read was outstanding (otherwise it counts from the read's
    completion and lags the device by them). ``clock_anchor_gate``: a slow read re-anchors only
    once the clock's count has reached half of ``gc_every_bytes`` (before, it is taken for the
    tail of the last collection or for queueing, see ``ClockState::gated``). ``clock_vote``: with
    ``clock_anchor_us`` > 0 the phase is voted instead of anchored: candidate phases are scored
    against every completed read, slow or fast (``attune_io::clock::PhaseVote``); by default
    (None) it is voted whenever the phase is unknown (a ``write_clock`` and ``clock_anchor_us`` >
    0) and neither anchor refinement is asked for; ``clock_vote=False`` keeps the anchor.
    ``hedge_delay_us`` > 0: a read the router was unsure about, still unanswered after that many
    µs, is read again from another replica and the first answer wins (``route::RiskyHedge``;
    not with ``hedging``, ``oracle`` or ``probe_models``). Unsure: the chosen replica's clock has
    no phase yet or its voted candidates disagree, or (``hedge_margin`` given, model policies) its
    slow margin is above ``-hedge_margin`` logits; ``hedge_every_read`` hedges every read. The
    result's ``hedged`` counts the backup reads (each loads its device). By default (None) an
    unknown phase (a ``write_clock`` and ``clock_anchor_us`` > 0, any policy but ``hedging`` and
    ``oracle``, no ``probe_models``) hedges every read after :data:`HEDGE_DELAY_FACTOR` ×
    ``clock_anchor_us``, and nothing is hedged otherwise; ``hedge_delay_us=0`` turns it off.
    ``clock_vote_half_life`` > 0 halves every voted candidate's score each that many completed
    reads (recent evidence weighs more; ``PhaseVote::half_life``); 0, the default, keeps every
    read's weight. With the phase known (``clock_anchor_us`` 0) there is nothing to vote and no
    read the clock is unsure about: ``clock_vote`` changes nothing, and ``hedge_delay_us`` hedges
    only with ``hedge_margin`` under a model policy or with ``hedge_every_read``. Settings that
    can never take effect are refused (``InvalidArgumentError`` naming them): ``clock_vote=True``
    or ``clock_vote_half_life`` without a ``write_clock``, ``hedge_every_read=True`` without a
    ``hedge_delay_us`` > 0, and a ``hedge_delay_us`` > 0 with neither a ``write_clock``, a
    ``hedge_margin`` nor ``hedge_every_read``."""
    unknown = (
        write_clock is not None
        and isinstance(clock_anchor_us, (int, float))
        and clock_anchor_us > 0
    )
    if clock_vote is None:
        clock_vote = unknown and not (clock_anchor_writes or clock_anchor_gate)
    hedge_by_default = unknown and policy not in ("hedging", "oracle") and probe_models is None
    if hedge_delay_us is None:
        hedge_delay_us = HEDGE_DELAY_FACTOR * float(clock_anchor_us) if hedge_by_default else 0.0
    if hedge_every_read is None:
        # hedge_delay_us=0 turns the default's backups off.
        hedge_every_read = (
            hedge_by_default and isinstance(hedge_delay_us, (int, float)) and hedge_delay_us > 0
        )
    _check_route_ints(write_clock, aged_bytes, clock_vote_half_life)
    _check_route_effect(
        write_clock,
        clock_vote,
        clock_vote_half_life,
        hedge_delay_us,
        hedge_margin,
        hedge_every_read,
    )
    if write_clock is not None:
        write_clock = tuple(write_clock)
    return _native.io_route(
        [check_trace(t, "every trace").columns() for t in traces],
        policy,
        _check_params(params),
        check_seed(seed),
        timeout_ns,
        models,
        tie,
        slow_factor,
        probe_models,
        probe_reads_us,
        probe_read_size,
        write_clock,
        clock_anchor_us,
        aged_bytes,
        bool(clock_anchor_writes),
        bool(clock_anchor_gate),
        bool(clock_vote),
        hedge_delay_us,
        hedge_margin,
        bool(hedge_every_read),
        clock_vote_half_life,
    )
