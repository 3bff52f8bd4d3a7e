"""`attune device`: learn a device's hidden parameters and check I/O against them.

* ``attune device profile PATH``: Experiments 1 and 2 on files under the directory PATH
  (O_DIRECT where allowed, fsync after each write; the files are always removed), then the
  statistical rule. Scaled to minutes (``--file-mb``, ``--samples``, ``--rounds``).
* ``attune device profile --simulated [--set NAME=VALUE]...``: the same on the simulated SSD,
  compared with the parameters planted in it. The device is the simulator's default with
  ``stripe_chips=4`` and ``map_fetch_us=10`` (a 256 KiB stripe that Experiment 1 can see); these
  two stay unless ``--set`` overrides them, and the 4-chip stripe becomes 0 (all chips) when the
  chip count ``--set`` gives is not a multiple of 4 (``attune.device.profile_simulated(None)``
  uses the bare simulator defaults instead, where the stripe is not visible).
* ``attune device check TRACE``: rules 1–5 over an strace log or a block trace, with parameters
  from a profile (``--params PROFILE.json``, written by ``profile --out``) or given
  (``--param chunk=65536``); each violation with its offset and size, the extra flash pages and
  the write amplification; rules whose parameter is unknown are listed as not checked.

Design note: docs/ssd-profile.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from attune.errors import InvalidArgumentError, StorageIOError

DESCRIPTION = __doc__

#: The simulated device ``--simulated`` profiles when no ``--set`` changes it.
SIMULATED_PRESET = {"stripe_chips": "4", "map_fetch_us": "10"}

_RULES = {
    1: "writes are multiples of the desirable write size",
    2: "chunk-sized reads start at a hot location",
    3: "writes start on a stripe boundary",
    4: "chunk-sized writes start on a chunk boundary",
    5: "writes touch no more flash pages than needed",
}


def _pairs(items: list[str] | None, flag: str) -> dict[str, str]:
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise InvalidArgumentError(f"{flag} takes NAME=VALUE, got {item!r}")
        out[name.strip()] = value.strip()
    return out


def _kb(b) -> str:
    if b is None:
        return "not found"
    if b >= 1 << 20 and b % (1 << 20) == 0:
        return f"{b >> 20} MiB"
    return f"{b // 1024} KiB" if b >= 1024 and b % 1024 == 0 else f"{b} B"


def _profile(args) -> int:
    from attune import device
    from attune.cli import progress

    config: dict = {"seed": args.seed}
    if args.file_mb is not None:
        config["file_bytes"] = args.file_mb << 20
    if args.samples is not None:
        config["samples_per_group"] = args.samples
    if args.max_guess_kb is not None:
        config["max_guess"] = args.max_guess_kb * 1024
    if args.min_guess_kb is not None:
        config["min_guess"] = args.min_guess_kb * 1024
    # The path, the settings and the output paths are checked before the (possibly long) run,
    # the path first.
    if args.path and not args.simulated:
        from attune.device.real import check_dir

        check_dir(args.path)
    params = None
    if args.simulated:
        if args.path:
            raise InvalidArgumentError("give either PATH or --simulated, not both")
        params = _simulated_params(_pairs(args.set, "--set"))
    if params is not None and args.rounds is not None:
        raise InvalidArgumentError(
            "--rounds applies to a profile of a PATH (the real device's read rounds); the "
            "simulated device takes --samples and --seed"
        )
    _check_config(config, args, params)
    _check_writable(args.out, "--out")
    if args.plot:
        _check_writable(f"{args.plot}-request-size.png", "--plot")
    if params is not None:
        with progress(args, desc="profile (simulated)", unit="step") as bar:

            def tick(done: int, total: int) -> None:
                bar.total = total
                bar.n = done
                bar.refresh()

            r = device.profile_simulated(params, config, args.seed, tick)
        r["params"] = {k: _number(v) for k, v in params.items()}
    else:
        if not args.path:
            raise InvalidArgumentError("give a directory PATH to profile, or --simulated")
        if args.set:
            raise InvalidArgumentError("--set applies to --simulated only")
        with progress(args, desc=f"profile {args.path}", unit="step") as bar:

            def tick(done: int, total: int) -> None:
                bar.total = total
                bar.n = done
                bar.refresh()

            r = device.profile_path(args.path, config, args.rounds or 4, tick)
    try:
        plots = device.plot_profiles(r, args.plot) if args.plot else []
    except OSError as e:
        raise StorageIOError(f"--plot: cannot write {args.plot}-*.png: {e.strerror or e}") from e
    summary = _summary(r, plots)
    if args.out:
        try:
            Path(args.out).write_text(json.dumps({**summary, "profile": _profile_data(r)}) + "\n")
        except OSError as e:
            raise StorageIOError(f"cannot write {args.out}: {e.strerror or e}", args.out) from e
    if args.json:
        print(json.dumps(summary))
        return 0
    src = "simulated SSD" if r["source"] == "simulated" else f"{args.path} ({r['io_mode']})"
    print(f"profile of {src}: {r['ios']} I/Os")
    planted: dict = {}
    if "params" in r:
        from attune.io import ssd_params

        sp = ssd_params(r["params"])
        planted = {"page": sp["page_bytes"], "chunk": sp["chunk_bytes"]}
    for k in device.PARAM_KEYS:
        f = r["learned"][k]
        val = _kb(f["value"]) if f["value"] is not None else "not found"
        exp = ""
        if "expected" in r and k in r["expected"]:
            want = r["expected"][k]
            if want is None:
                # The planted value is beyond what this run can measure: claiming one is wrong,
                # unless it is the planted value itself (seen where the model expects no effect).
                if f["value"] is None:
                    verdict = "right"
                elif f["value"] == planted.get(k):
                    verdict = f"found {val}, the planted value, although not expected to show"
                else:
                    verdict = f"FALSE POSITIVE, found {val}"
                exp = f"  (planted: not measurable by this run; {verdict})"
            elif f["value"] == want:
                exp = f"  (planted {_kb(want)}: exact)"
            elif f["value"] is None:
                exp = f"  (planted {_kb(want)}: MISSED, nothing found)"
            else:
                exp = f"  (planted {_kb(want)}: MISSED, found {val})"
        print(f"  {k:16} {val:>10}  confidence {f['confidence']:.3f}{exp}")
        print(f"  {'':16} {f['reason']}")
    for n in r.get("notes", []):
        print(f"  note: {n}")
    if "recovered" in r:
        print(f"recovered exactly: {'yes' if r['recovered'] or _all_planted(r, planted) else 'no'}")
    for p in plots:
        print(f"plot: {p}")
    return 0


#: Profile settings the CLI sets, and the flag (with its unit) that sets each.
_FLAGS = {
    "file_bytes": ("--file-mb", 20),
    "samples_per_group": ("--samples", 0),
    "min_guess": ("--min-guess-kb", 10),
    "max_guess": ("--max-guess-kb", 10),
}


def _simulated_params(given: dict[str, str]) -> dict[str, str]:
    """The simulated device: :data:`SIMULATED_PRESET` under the user's ``--set`` values. The
    preset's 4-chip stripe is dropped (0: a stripe over all chips) when the user's geometry has
    a chip count it does not divide, so ``--set channels=1 --set chips_per_channel=1`` is the
    one-chip device the docs name, not an error about a setting the user never gave."""
    params = {**SIMULATED_PRESET, **given}
    if "stripe_chips" not in given:
        from attune.io import ssd_params

        try:
            p = ssd_params({**params, "stripe_chips": "0"})
        except InvalidArgumentError:
            return params  # the user's own values are wrong: let the profile name them
        if (p["channels"] * p["chips_per_channel"]) % int(SIMULATED_PRESET["stripe_chips"]):
            params["stripe_chips"] = "0"
    return params


def _check_config(config: dict, args, params: dict | None) -> None:
    """The settings, checked, with errors in the CLI's terms (``--file-mb must be at least 4``)
    rather than the Python API's (``file_bytes``). ``params`` are the simulated device's
    (``None`` for a PATH). The test files must fit the simulated device, or the file system of
    PATH, before :func:`attune.device.profile_config` builds the random orders, whose size grows
    with ``--file-mb`` (about 2 KiB per MiB)."""
    from attune import device
    from attune.device.real import REAL_DEFAULTS, min_file_bytes

    defaults = device.profile_config(None)
    if not args.simulated:
        defaults = {**defaults, **REAL_DEFAULTS}
    lo = config.get("min_guess", defaults["min_guess"])
    hi = config.get("max_guess", defaults["max_guess"])
    if lo > hi:
        flag = "--min-guess-kb" if "min_guess" in config else "the default --min-guess-kb"
        top = "" if "max_guess" in config else " by default"
        raise InvalidArgumentError(
            f"{flag} {lo >> 10} is above --max-guess-kb ({hi >> 10}{top}): give a larger "
            f"--max-guess-kb or a smaller --min-guess-kb"
        )
    least = min_file_bytes({**defaults, **config})
    fb = config.get("file_bytes", defaults["file_bytes"])
    if fb < least:
        why = (
            f"4 × the largest of the {_kb(defaults['read_bytes'])} read, the "
            f"{_kb(config.get('max_write', defaults['max_write']))} largest write and the "
            f"{_kb(config.get('max_guess', defaults['max_guess']))} largest chunk guess"
        )
        if "file_bytes" in config:
            raise InvalidArgumentError(f"--file-mb must be at least {least >> 20} ({why})")
        raise InvalidArgumentError(
            f"the default --file-mb {fb >> 20} is too small for these settings: give --file-mb "
            f"{least >> 20} or more ({why})"
        )
    _check_fits(fb, len(defaults["write_sizes"]), args, params, least)
    try:
        device.profile_config(config)
    except InvalidArgumentError as e:
        msg = str(e)
        for key, (flag, shift) in _FLAGS.items():
            if f"`{key}` = " in msg and key in config:
                value = config[key] >> shift
                raise InvalidArgumentError(f"{flag} {value}: {msg}") from e
        raise


def _all_planted(r: dict, planted: dict) -> bool:
    """Every expected value learned, and every value claimed beyond ``expected`` the planted one
    (a page the model did not expect to show, found exactly)."""
    for k, want in r["expected"].items():
        got = r["learned"][k]["value"]
        if got != want and not (want is None and got is not None and got == planted.get(k)):
            return False
    return True


def _check_fits(file_bytes: int, n_files: int, args, params: dict | None, least: int) -> None:
    """``n_files`` test files of ``file_bytes`` fit the simulated device (from offset
    ``FILE_BASE``) or, for a PATH, the size of its file system (the free space is checked by the
    profile itself, after stale files are removed). ``least`` is the smallest file size these
    settings allow: when even that does not fit, the advice is not to shrink the files."""
    import shutil

    need = file_bytes * n_files
    if params is not None:
        from attune.io import ssd_params

        cap = ssd_params(params)["capacity_bytes"]
        smallest = least * n_files + FILE_BASE > cap
        if need + FILE_BASE > cap:
            raise InvalidArgumentError(
                f"--file-mb {file_bytes >> 20}: the {n_files} test files need "
                f"{_kb(need)} from offset {_kb(FILE_BASE)}, beyond the simulated device's "
                f"capacity of {_kb(cap)} ("
                + (
                    f"even the smallest files these settings allow, {least >> 20} MiB each, do "
                    "not fit: give a larger --set capacity_bytes)"
                    if smallest
                    else "use a smaller --file-mb, or a larger --set capacity_bytes)"
                )
            )
    elif args.path:
        try:
            total = shutil.disk_usage(args.path).total
        except OSError:
            return  # the profile reports an unreadable path itself
        smallest = least * n_files > total
        if need > total:
            advice = (
                "profile a directory on a larger file system (even the smallest files these "
                f"settings allow, {least >> 20} MiB each, do not fit)"
                if smallest
                else f"use a smaller --file-mb ({least >> 20} is the smallest these settings allow)"
            )
            raise InvalidArgumentError(
                f"--file-mb {file_bytes >> 20}: the {n_files} test files need {_kb(need)}, "
                f"more than the whole file system under {args.path} ({_kb(total)}); {advice}"
            )


#: Where the simulated profile's files start on the device (``profile::FILE_BASE``).
FILE_BASE = 1 << 30


def _number(text: str) -> int | float | str:
    """A ``--set`` value as the number it spells (JSON output keeps one type per value)."""
    for conv in (int, float):
        try:
            return conv(text.replace("_", ""))
        except ValueError:
            pass
    return text


def _check_writable(path: str | None, flag: str) -> None:
    """Fails now if ``path`` cannot be written later (its directory is missing or read-only)."""
    if not path:
        return
    import os

    d = Path(path).parent
    if not d.is_dir():
        raise InvalidArgumentError(f"{flag}: directory {d} of {path} does not exist")
    if not os.access(d, os.W_OK | os.X_OK):
        raise InvalidArgumentError(f"{flag}: directory {d} of {path} is not writable")
    if Path(path).is_dir():
        raise InvalidArgumentError(f"{flag}: {path} is a directory")


def _summary(r: dict, plots: list[str]) -> dict:
    from attune.device import learned_params

    out = {
        "source": r["source"],
        # Parameters found (0..5): 0 is the honest "no structure" of a device without any.
        "found": sum(f["value"] is not None for f in r["learned"].values()),
        "learned": r["learned"],
        "params_learned": learned_params(r["learned"]),
        "ios": r["ios"],
        "plots": plots,
    }
    for k in ("expected", "recovered", "params", "io_mode", "notes", "seconds", "device_ns"):
        if k in r:
            out[k] = r[k]
    return out


def _profile_data(r: dict) -> dict:
    import numpy as np

    return {
        "sizes": r["sizes"],
        "size_mean_ns": [float(np.mean(v)) for v in r["size_latencies_ns"]],
        "guesses": [
            {"guess": g, "offset_unit": u, "group_mean_ns": [float(np.mean(v)) for v in groups]}
            for g, u, groups in r["guesses"]
        ],
    }


def _check_params(args) -> dict:
    from attune.device import PARAM_KEYS

    params: dict = {k: None for k in PARAM_KEYS}
    if args.params:
        try:
            doc = json.loads(Path(args.params).read_text())
        except OSError as e:
            raise StorageIOError(
                f"cannot read {args.params}: {e.strerror or e}", args.params
            ) from e
        except UnicodeDecodeError as e:
            raise InvalidArgumentError(
                f"{args.params} is not a profile JSON file: not UTF-8 text (byte {e.start})"
            ) from e
        except json.JSONDecodeError as e:
            raise InvalidArgumentError(f"{args.params} is not a profile JSON file: {e}") from e
        learned = doc.get("params_learned", doc) if isinstance(doc, dict) else None
        if not isinstance(learned, dict) or not any(k in learned for k in PARAM_KEYS):
            raise InvalidArgumentError(
                f"{args.params} is not a profile: it holds none of {', '.join(PARAM_KEYS)} "
                "(write one with `attune device profile --out`)"
            )
        for k in PARAM_KEYS:
            v = learned.get(k)
            if v is not None and not isinstance(v, int):
                raise InvalidArgumentError(f"{args.params}: {k} must be an integer, got {v!r}")
            params[k] = v
    for k, v in _pairs(args.param, "--param").items():
        if k not in params:
            raise InvalidArgumentError(f"unknown parameter {k!r}; valid: {', '.join(PARAM_KEYS)}")
        if not v:
            # An empty value is most often a shell variable that was not set: refusing it keeps
            # a typo from silently turning a rule off.
            raise InvalidArgumentError(
                f"--param {k}=: empty value (use `--param {k}=none` to make it unknown)"
            )
        try:
            params[k] = None if v.lower() in ("none", "unknown") else int(v.replace("_", ""), 0)
        except ValueError as e:
            raise InvalidArgumentError(f"--param {k}={v}: not a byte count") from e
    from attune.device import check_params

    return check_params(params)


def _check(args) -> int:
    from attune import device

    params = _check_params(args)
    trace = device.load_io_trace(args.trace, args.format, args.file)
    r = device.check(trace, params)
    d = r.to_dict(limit=args.limit)
    d["trace"] = args.trace
    d["format"] = trace.format
    d["files"] = trace.files
    d["skipped"] = trace.skipped
    d["skipped_by"] = trace.skipped_by
    d["unreadable_lines"] = trace.unreadable
    d["vectored"] = trace.vectored
    status = 3 if args.fail_on_violation and d["violations_total"] else 0
    if args.fail_on_violation and len(d["unchecked"]) >= len(_RULES):
        # A gate that checked nothing must not pass: every parameter was unknown (a profile of
        # a device that shows no structure, or --param ...=none).
        status = 4
    no_io = d["reads"] + d["writes"] == 0
    if args.fail_on_violation and no_io:
        # Nor a gate over no I/O (a --file that matches nothing, a trace of no complete call).
        status = 4
    if args.json:
        print(json.dumps(d))
        return status
    print(
        f"{args.trace} ({trace.format}): {d['reads']} reads, {d['writes']} writes, "
        f"{len(trace.files)} file(s)" + (f", {trace.vectored} vectored" if trace.vectored else "")
    )
    if trace.skipped:
        why = "; ".join(f"{n} {r}" for r, n in trace.skipped_by.items())
        print(f"skipped {trace.skipped} call(s): {why or 'see --json'}")
    if trace.unreadable:
        print(f"ignored {trace.unreadable} line(s) that are not a complete system call")
    print(
        "parameters: "
        + ", ".join(f"{k}={_kb(v) if v is not None else 'unknown'}" for k, v in params.items())
    )
    unchecked = {u["rule"]: u["needs"] for u in d["unchecked"]}
    for i in range(1, 6):
        if i in unchecked:
            print(f"  rule {i} ({_RULES[i]}): not checked, needs the {unchecked[i]}")
        else:
            n = d["counts"][f"rule{i}"]
            print(f"  rule {i} ({_RULES[i]}): {n} violation{'' if n == 1 else 's'}")
    if params.get("page"):
        wa = (
            f"write amplification {d['write_amplification']:.3f}"
            if d["writes"]
            else "no writes, so no write amplification"
        )
        print(
            f"flash pages written: {d['flash_pages']} (minimum {d['min_flash_pages']}, "
            f"{d['extra_pages']} extra); {wa}"
        )
    for v in d["violations"]:
        n = v["extra_pages"]
        extra = f", {n} extra page{'' if n == 1 else 's'}" if n else ""
        print(
            f"  #{v['index']} rule {v['rule']}: {v['op']} {v['file']} offset {v['offset']} "
            f"size {v['size']}{extra}"
        )
    if d["violations_total"] > len(d["violations"]):
        print(f"  ... {d['violations_total'] - len(d['violations'])} more (--limit)")
    if no_io and status != 4:
        print("no I/O was checked (check --file and the trace's format)")
    if status == 4 and no_io:
        print("no I/O was checked (check --file and the trace's format): --fail-on-violation fails")
    elif status == 4:
        print("no rule could be checked (every parameter is unknown): --fail-on-violation fails")
    elif len(d["unchecked"]) >= len(_RULES):
        print(
            "no rule was checked: give --params PROFILE.json (from attune device profile) or --param"
        )
    return status


def register(sub) -> None:
    from attune.cli import U32_MAX, add_output_flags, int_range

    p = sub.add_parser(
        "device",
        help="learn an SSD's hidden parameters and check I/O traces against them",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    vs = p.add_subparsers(dest="device_verb", metavar="COMMAND", required=True)
    q = vs.add_parser(
        "profile",
        help="Experiments 1 and 2 on a directory or the simulated SSD",
        description="Learn the desirable write size, stripe, chunk, flash page and hot "
        "locations of the device under PATH, or of the simulated SSD.",
    )
    q.add_argument("path", nargs="?", metavar="PATH", help="directory to put the test files in")
    q.add_argument("--simulated", action="store_true", help="profile the simulated SSD")
    q.add_argument(
        "--set",
        action="append",
        metavar="NAME=VALUE",
        help="a simulated SSD parameter (repeatable; `attune io simulate --list-params`)",
    )
    q.add_argument(
        "--file-mb",
        type=int_range(1, 1 << 40),
        help="MiB per test file (8 on a path, 64 simulated; at most the simulated capacity)",
    )
    q.add_argument(
        "--samples",
        type=int_range(2, U32_MAX),
        help="chunks per offset group (4 on a path, 16 simulated)",
    )
    q.add_argument(
        "--rounds",
        type=int_range(1, 1_000_000),
        help="read rounds of Experiment 1 on a path (4; not with --simulated)",
    )
    q.add_argument(
        "--min-guess-kb",
        type=int_range(1, U32_MAX >> 10),
        help="smallest chunk-size guess in KiB (4; raised to twice the O_DIRECT alignment on a "
        "path that needs more, and the run says so)",
    )
    q.add_argument(
        "--max-guess-kb",
        type=int_range(1, U32_MAX >> 10),
        help="largest chunk-size guess in KiB (512)",
    )
    q.add_argument(
        "--seed", type=int_range(0, 2**64 - 1), default=1, help="seed of the random orders (1)"
    )
    q.add_argument(
        "--plot",
        metavar="PREFIX",
        help="write PREFIX-request-size.png and PREFIX-location.png (needs matplotlib)",
    )
    add_output_flags(
        q, out="write the learned parameters and profiles as JSON (for `check --params`)"
    )
    q.set_defaults(func=_profile)

    c = vs.add_parser(
        "check",
        help="rules 1-5 over an I/O trace",
        description="Check TRACE (strace output, or a block trace: msr, cloudphysics, "
        "attune-csv, attune) against the device's parameters.",
    )
    c.add_argument("trace", metavar="TRACE")
    c.add_argument(
        "--format",
        choices=("strace", "msr", "cloudphysics", "attune-csv", "attune"),
        help="trace format (sniffed when omitted)",
    )
    c.add_argument("--params", metavar="PROFILE.json", help="parameters from `profile --out`")
    c.add_argument(
        "--param",
        action="append",
        metavar="NAME=BYTES",
        help="a parameter (desirable_write, stripe, chunk, page, hot_offset); "
        "overrides --params; `none` makes it unknown",
    )
    c.add_argument("--file", metavar="SUBSTRING", help="strace: only files whose path contains it")
    c.add_argument("--limit", type=int_range(0, 2**31), default=20, help="violations to list (20)")
    c.add_argument(
        "--fail-on-violation",
        action="store_true",
        help="exit with status 3 when any checked rule is violated, 4 when no rule or no I/O "
        "could be checked (to gate CI); errors exit 1, usage errors 2",
    )
    add_output_flags(c)
    c.set_defaults(func=_check)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run as `attune device ...`")
