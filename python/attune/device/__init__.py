"""Learning a device's hidden parameters and checking I/O against them.

* :func:`profile_simulated`: Experiments 1 and 2 on the simulated SSD (``attune-io``'s
  ``profile`` module) and the statistical rule; the result carries the planted parameters it
  should recover (``expected``).
* :func:`profile_path`: the same experiments on real files under a directory (O_DIRECT where the
  file system allows, fsync after each write), scaled to minutes; the files are always removed.
* :func:`check`: rules 1–5 over an I/O trace (strace output, Attune's block traces, MSR or
  CloudPhysics traces) with learned or given parameters (:mod:`attune.device.traces`).
* :func:`plot_profiles`: both profiles as PNG files (matplotlib).

Design note: ``docs/ssd-profile.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attune import _native
from attune.device.real import profile_path
from attune.device.traces import TraceColumns, load_io_trace
from attune.errors import InvalidArgumentError, StorageIOError

__all__ = [
    "PARAM_KEYS",
    "CheckResult",
    "TraceColumns",
    "check",
    "check_params",
    "learned_params",
    "load_io_trace",
    "plot_profiles",
    "profile_config",
    "profile_path",
    "profile_simulated",
]

#: The learned parameters, in the order reports print them.
PARAM_KEYS = ("desirable_write", "stripe", "chunk", "page", "hot_offset")

Progress = Callable[[int, int], None]


#: Profile settings and their largest values (integers) or None (numbers in (0, inf)).
_CONFIG_KEYS: dict[str, int | None] = {
    "file_bytes": 2**64 - 1,
    "min_write": 2**32 - 1,
    "max_write": 2**32 - 1,
    "read_bytes": 2**32 - 1,
    "offset_unit": 2**32 - 1,
    "min_guess": 2**32 - 1,
    "max_guess": 2**32 - 1,
    "samples_per_group": 2**32 - 1,
    "seed": 2**64 - 1,
    "rel_threshold": None,
    "size_rel_threshold": None,
    "t_threshold": None,
}


def _int_arg(name: str, v: Any, hi: int, lo: int = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise InvalidArgumentError(f"{name} must be an integer, got {v!r}")
    if v < lo or v > hi:
        raise InvalidArgumentError(f"{name} = {v} is out of range (allowed: {lo}..{hi})")
    return v


def _checked_config(config: dict | None) -> dict | None:
    """``config`` with every value's type and range checked; the error names the setting."""
    if config is None:
        return None
    if not isinstance(config, dict):
        raise InvalidArgumentError(f"config must be a dict, got {type(config).__name__}")
    for k, v in config.items():
        if k not in _CONFIG_KEYS:
            raise InvalidArgumentError(
                f"unknown profile setting {k!r}; valid: {', '.join(_CONFIG_KEYS)}"
            )
        hi = _CONFIG_KEYS[k]
        if hi is not None:
            _int_arg(k, v, hi)
        elif isinstance(v, bool) or not isinstance(v, (int, float)):
            raise InvalidArgumentError(f"{k} must be a number, got {v!r}")
    return config


def profile_config(config: dict | None = None) -> dict[str, Any]:
    """The profile settings (defaults overridden by ``config``), validated; includes the write
    sizes, guesses and the shared random orders."""
    return _native.device_profile_config(_checked_config(config))


def profile_simulated(
    params: dict | None = None,
    config: dict | None = None,
    seed: int = 0,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Both experiments on a simulated SSD with ``params`` (``attune io simulate --list-params``)
    and the rule. Keys: ``sizes``, ``size_latencies_ns``, ``guesses``, ``learned``, ``expected``,
    ``ios``, ``device_ns``, ``recovered`` (every expected parameter learned exactly)."""
    if params is not None and not isinstance(params, dict):
        raise InvalidArgumentError(f"params must be a dict, got {type(params).__name__}")
    seed = _int_arg("seed", seed, 2**64 - 1)
    r = _native.device_profile_simulated(params, _checked_config(config), seed, progress)
    r["recovered"] = recovered(r["learned"], r["expected"])
    r["source"] = "simulated"
    return r


def recovered(learned: dict, expected: dict) -> bool:
    """Whether every expected parameter was learned exactly (an expected None means "beyond
    what the run measures": the stripe past the largest write, the chunk of a one-chip device,
    a page equal to the chunk; nothing may then be claimed)."""
    return all(learned[k]["value"] == expected[k] for k in PARAM_KEYS if k in expected)


def learned_params(learned: dict) -> dict[str, int | None]:
    """``{name: bytes or None}`` from a profile's ``learned`` findings."""
    if not isinstance(learned, dict):
        raise InvalidArgumentError(
            f"learned must be a profile's `learned` dict, got {type(learned).__name__}"
        )
    missing = [k for k in PARAM_KEYS if not isinstance(learned.get(k), dict)]
    if missing:
        raise InvalidArgumentError(
            f"learned has no finding for {', '.join(missing)}: pass the `learned` dict of a "
            f"profile (profile_simulated(...)['learned'] or a profile --out file's)"
        )
    return {k: learned[k].get("value") for k in PARAM_KEYS}


@dataclass
class CheckResult:
    """Rules 1–5 over one trace: the violations as columns, counts per rule, rules that could not
    be checked, flash-page totals and the file names of the trace."""

    raw: dict[str, Any]
    files: list[str] = field(default_factory=list)
    params: dict[str, int | None] = field(default_factory=dict)

    @property
    def counts(self) -> list[int]:
        return list(self.raw["counts"])

    @property
    def unchecked(self) -> list[tuple[int, str]]:
        return list(self.raw["unchecked"])

    def violations(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Violations as dicts (rule, index, file, offset, size, op, extra_pages)."""
        r = self.raw
        n = len(r["rule"]) if limit is None else min(limit, len(r["rule"]))
        return [
            {
                "rule": r["rule"][i],
                "index": r["index"][i],
                "file": self.files[r["file"][i]] if r["file"][i] < len(self.files) else "",
                "offset": r["offset"][i],
                "size": r["size"][i],
                "op": "write" if r["write"][i] else "read",
                "extra_pages": r["extra_pages"][i],
            }
            for i in range(n)
        ]

    def __repr__(self) -> str:
        r = self.raw
        counts = ", ".join(f"rule{i + 1}={c}" for i, c in enumerate(r["counts"]))
        return (
            f"CheckResult(reads={r['reads']}, writes={r['writes']}, {counts}, "
            f"violations={len(r['rule'])}, unchecked={[k for k, _ in r['unchecked']]})"
        )

    def to_dict(self, limit: int | None = 1000) -> dict[str, Any]:
        r = self.raw
        return {
            "params": self.params,
            "reads": r["reads"],
            "writes": r["writes"],
            "write_bytes": r["write_bytes"],
            "counts": {f"rule{i + 1}": c for i, c in enumerate(r["counts"])},
            "unchecked": [{"rule": k, "needs": why} for k, why in r["unchecked"]],
            "flash_pages": r["flash_pages"],
            "min_flash_pages": r["min_flash_pages"],
            "extra_pages": r["extra_pages_total"],
            "write_amplification": r["write_amplification"],
            "violations": self.violations(limit),
            "violations_total": len(r["rule"]),
        }


def check(trace: TraceColumns | str | Path, params: dict[str, int | None]) -> CheckResult:
    """Rules 1–5 over ``trace`` with ``params`` (keys of :data:`PARAM_KEYS`; None = unknown).
    ``trace`` is a :class:`TraceColumns` or the path of a trace file, read with
    :func:`load_io_trace` (format sniffed)."""
    if isinstance(trace, (str, Path)):
        trace = load_io_trace(trace)
    if not isinstance(trace, TraceColumns):
        raise InvalidArgumentError(
            f"trace must be a TraceColumns (from attune.device.load_io_trace or parse_strace), "
            f"got {type(trace).__name__}"
        )
    p = check_params(params)
    raw = _native.device_check(trace.file, trace.offset, trace.size, trace.write, p)
    return CheckResult(raw, list(trace.files), p)


def check_params(params: dict[str, int | None]) -> dict[str, int | None]:
    """The rule parameters, checked: a dict of :data:`PARAM_KEYS` (others are refused) to a
    positive byte count or None; chunk and page powers of two, the hot offset below the chunk."""
    if not isinstance(params, dict):
        raise InvalidArgumentError(
            f"params must be a dict of {', '.join(PARAM_KEYS)}, got {type(params).__name__}"
        )
    unknown = [k for k in params if k not in PARAM_KEYS]
    if unknown:
        raise InvalidArgumentError(
            f"unknown parameter {unknown[0]!r}; valid: {', '.join(PARAM_KEYS)}"
        )
    p: dict[str, int | None] = {}
    for k in PARAM_KEYS:
        v = params.get(k)
        if v is not None:
            if type(v) is int and v == 0 and k != "hot_offset":
                raise InvalidArgumentError(
                    f"{k} must be positive (to make it unknown: None in Python, `none` with "
                    "--param)"
                )
            v = _int_arg(k, v, 2**62, 0 if k == "hot_offset" else 1)
            if k in ("chunk", "page") and v & (v - 1):
                raise InvalidArgumentError(f"{k} = {v} must be a power of two")
        p[k] = v
    if p["chunk"] is not None and p["hot_offset"] is not None and p["hot_offset"] >= p["chunk"]:
        raise InvalidArgumentError(
            f"hot_offset = {p['hot_offset']} must be below the chunk ({p['chunk']})"
        )
    if p["chunk"] is not None and p["page"] is not None and p["page"] > p["chunk"]:
        raise InvalidArgumentError(f"page = {p['page']} must not exceed the chunk ({p['chunk']})")
    return p


def plot_profiles(result: dict[str, Any], prefix: str) -> list[str]:
    """Writes ``PREFIX-request-size.png`` and ``PREFIX-location.png``; returns the paths, or an
    empty list when matplotlib is not installed. ``result`` is what :func:`profile_simulated` or
    :func:`profile_path` returned; an unwritable prefix is :class:`attune.StorageIOError`."""
    missing = [k for k in ("sizes", "size_latencies_ns", "guesses", "learned") if k not in result]
    if not isinstance(result, dict) or missing:
        raise InvalidArgumentError(
            "plot_profiles takes the dict profile_simulated or profile_path returned"
            + (f" (missing {', '.join(missing)})" if isinstance(result, dict) else "")
        )
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    try:
        return _plot_profiles(result, prefix, plt)
    except OSError as e:
        if isinstance(e, StorageIOError):
            raise
        raise StorageIOError(
            f"cannot write the plots {prefix}-*.png: {e.strerror or e}", str(prefix)
        ) from e


def _plot_profiles(result: dict[str, Any], prefix: str, plt: Any) -> list[str]:
    import numpy as np

    out = []
    sizes = result["sizes"]
    means = [
        float(np.mean(v)) / 1e3 if len(v) else float("nan") for v in result["size_latencies_ns"]
    ]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(range(len(sizes)), means, marker="o")
    ax.set_xticks(range(len(sizes)), [_kb(s) for s in sizes], rotation=45)
    ax.set_xlabel("write request size of the file")
    ax.set_ylabel("mean 1 MiB read latency (µs)")
    st = result["learned"]["stripe"]["value"]
    ax.set_title(f"Request-size profile (stripe: {_kb(st) if st else 'not found'})")
    fig.tight_layout()
    path = f"{prefix}-request-size.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    out.append(path)
    guesses = result["guesses"]
    fig, axes = plt.subplots(len(guesses), 1, figsize=(7, 1.4 * len(guesses) + 0.5), squeeze=False)
    for ax, (g, unit, groups) in zip(axes[:, 0], guesses, strict=True):
        m = [float(np.mean(v)) / 1e3 if len(v) else float("nan") for v in groups]
        ax.plot([i * unit / 1024 for i in range(len(m))], m, lw=0.8)
        ax.set_ylabel(_kb(g), rotation=0, labelpad=18)
    axes[-1, 0].set_xlabel("offset group inside the guessed chunk (KiB)")
    fig.supylabel("mean read latency (µs) per chunk-size guess", fontsize=9)
    ch = result["learned"]["chunk"]["value"]
    axes[0, 0].set_title(f"Location profile (chunk: {_kb(ch) if ch else 'not found'})")
    fig.tight_layout()
    path = f"{prefix}-location.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    out.append(path)
    return out


def _kb(b: int | None) -> str:
    if b is None:
        return "-"
    return f"{b // 1024}K" if b >= 1024 else f"{b}B"
