"""`attune bench hash`: runs the VIP hashing benchmark (``attune-bench hash``).

The verb is added to ``attune bench`` by ``add_parser(bench_subparsers)``; it forwards its options
to the harness, shows a progress bar (one step per table and setting) and relays the summary
lines. The output flags are every verb's (:func:`attune.cli.add_output_flags`): ``--out PATH``
appends the rows to PATH, ``--json`` prints them as JSON lines on stdout instead of the summary
lines, ``--no-progress`` (or ``--json``) turns the bar off. The harness is found by
:func:`attune.bench.find_binary` (``$ATTUNE_BENCH_BIN``, the venv, ``target/release/``, ``PATH``);
``--build`` compiles it first with cargo.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from attune import Error

BINARY = "attune-bench"
#: The harness subcommand this verb runs.
SUBCOMMAND = "hash"
# Repository root when running from a source checkout (python/attune/_cli_hash.py -> ../../).
_REPO = Path(__file__).resolve().parents[2]


class BenchHashError(Error):
    """The benchmark binary is missing or failed."""


def add_parser(bench_subparsers) -> None:
    """Adds ``hash`` to the ``attune bench`` sub-verbs."""
    p = bench_subparsers.add_parser(
        "hash",
        help="VIP hashing vs chained hashing vs std HashMap (roofline, adaptive, join)",
        description="Run attune-bench hash; every option is forwarded to the harness.",
    )
    p.add_argument("--tables", default="vip,chained,hashbrown", help="comma list of tables")
    p.add_argument("--mode", choices=("roofline", "adaptive", "join"), default="roofline")
    p.add_argument("--zipf", default="1.0", help="zipf factors, comma separated")
    p.add_argument("--keys", type=int, default=1_000_000, help="keys in the table / |R|")
    p.add_argument("--operations", type=int, default=10_000_000, help="timed operations")
    p.add_argument("--load-factor", help="fixed load factors, comma separated")
    p.add_argument("--churn", help="PRCT:FREQ popularity churn (adaptive mode)")
    p.add_argument("--mix", help="F:I:D fetch/insert/delete percentages (adaptive mode)")
    p.add_argument("--ratio", help="join |S|/|R| ratios, comma separated")
    p.add_argument("--seed", default="1", help="seeds, comma separated (one setting each)")
    p.add_argument("--repeat", type=int, default=1, help="interleaved rounds; medians reported")
    p.add_argument("--build", action="store_true", help="cargo build the binary first")
    from attune.cli import add_output_flags

    add_output_flags(
        p,
        out="append the JSON rows to PATH",
        json_help="print the rows as JSON lines on stdout (no summary lines, no bar)",
    )
    p.set_defaults(func=run)


def find_binary(build: bool) -> str:
    if build:
        cmd = ["cargo", "build", "--release", "-p", "attune-bench"]
        try:
            subprocess.run(cmd, cwd=_REPO, check=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            raise BenchHashError(f"building {BINARY} failed: {exc}") from exc
        return str(_REPO / "target" / "release" / BINARY)  # the one just built
    from attune.bench import find_binary as find_harness

    return str(find_harness())


def build_argv(args) -> list[str]:
    argv = ["--tables", args.tables, "--mode", args.mode, "--zipf", args.zipf]
    argv += ["--keys", str(args.keys), "--operations", str(args.operations)]
    for flag, value in (
        ("--load-factor", args.load_factor),
        ("--churn", args.churn),
        ("--mix", args.mix),
        ("--ratio", args.ratio),
        ("--out", getattr(args, "out", None)),
    ):
        if value is not None:
            argv += [flag, str(value)]
    argv += ["--seed", str(args.seed), "--repeat", str(args.repeat)]
    if getattr(args, "json", False):
        argv.append("--json")
    return argv


def _count(value) -> int:
    return len(str(value).split(",")) if value else 1


def expected_lines(args) -> int:
    """Result lines the binary prints: one per table and setting."""
    count = _count
    per = count(args.ratio) if args.mode == "join" else count(args.load_factor)
    return count(args.tables) * count(args.zipf) * count(args.seed) * per


def run(args) -> int:
    binary = find_binary(args.build)
    argv = [binary, SUBCOMMAND, *build_argv(args)]
    if args.json:  # rows straight to stdout, nothing else there
        try:
            done = subprocess.run(argv, check=False, stderr=subprocess.PIPE, text=True)
        except OSError as exc:
            raise BenchHashError(f"cannot run {binary}: {exc}") from exc
        if done.returncode != 0:
            # The harness's own message goes into the CLI's JSON error object.
            raise BenchHashError(done.stderr.strip() or f"{BINARY} exited with {done.returncode}")
        return 0
    from attune.cli import progress

    bar = progress(args, total=expected_lines(args), unit="row")
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as exc:
        raise BenchHashError(f"cannot run {binary}: {exc}") from exc
    with bar:
        assert proc.stdout is not None
        for line in proc.stdout:
            bar.write(line.rstrip("\n"))
            bar.update(1)
    err = proc.stderr.read() if proc.stderr else ""
    if proc.wait() != 0:
        raise BenchHashError(err.strip() or f"{BINARY} exited with {proc.returncode}")
    return 0
