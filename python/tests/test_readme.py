"""Every ```python and ```sh block of README.md runs as printed and succeeds.

One test case per block, named ``README:LINE`` (the line of the opening fence), so a failure points
at the example. Blocks run in README order, each in a fresh working directory of its own (relative
files such as ``out.jsonl`` or ``acc_split`` belong to one block), while the absolute example paths
(``/tmp/mydb``, ``/tmp/big``) are rewritten to one shared directory, so that a block reading
``/tmp/mydb`` sees what an earlier block wrote there, as it would for a reader going down the page.

Python blocks run in a fresh interpreter (``sys.executable``). Shell blocks run line by line with
bash, the interpreter's ``bin`` directory first on ``PATH`` (``attune`` is the venv's); backslash
continuations are joined, comment lines skipped, and ``make`` lines skipped (the suite itself runs
under ``make test``). Every command must exit 0.

The README's sizes (a million keys, a million operations) would take minutes here; the table
``SUBSTITUTIONS`` scales them down, changing numbers only, never the code path. A benchmark that
names a peer engine (RocksDB, LevelDB, WiredTiger, LMDB) is skipped only when ``attune bench
engines`` says that engine is unavailable on this machine.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BIN = Path(sys.executable).parent
TIMEOUT_S = 120

# (pattern, replacement, why): applied to every block, in order. Each must match some block
# (checked by test_every_substitution_is_used) so that the table cannot outlive the README.
SUBSTITUTIONS: list[tuple[str, str, str]] = [
    (r"/tmp/(\w+)", r"{shared}/\1", "example databases live under the test's tmp dir"),
    (r"--records \S+", "--records 3000", "benchmarks and the demo: 3,000 records"),
    (r"--operations \S+", "--operations 3000", "benchmarks: 3,000 operations"),
    (r"--keys \S+", "--keys 4096", "hash benchmark: 4,096 keys"),
    (r'keys\("seg1", 1_000_000', 'keys("seg1", 20_000', "workload keys: 20,000"),
    (
        r"requests\(\"zipfian:0.99\", 1_000_000, 100_000",
        'requests("zipfian:0.99", 20_000, 2_000',
        "workload requests: 2,000 over 20,000 keys",
    ),
    (r"range\(1_000_000\)", "range(20_000)", "VIP hash map: 20,000 keys"),
]

PEERS = ("rocksdb", "leveldb", "wiredtiger", "lmdb", "db_bench")


@dataclass
class Block:
    lang: str
    line: int  # 1-based line of the opening fence
    text: str


def readme_blocks() -> list[Block]:
    blocks: list[Block] = []
    lang, start, body = None, 0, []
    for no, line in enumerate(README.read_text(encoding="utf-8").splitlines(), start=1):
        fence = re.match(r"^```(\w*)\s*$", line)
        if lang is None and fence:
            lang, start, body = fence.group(1), no, []
        elif lang is not None and line.startswith("```"):
            if lang in ("python", "sh"):
                blocks.append(Block(lang, start, "\n".join(body) + "\n"))
            lang = None
        elif lang is not None:
            body.append(line)
    return blocks


def substitute(text: str, shared: Path) -> str:
    for pattern, repl, _why in SUBSTITUTIONS:
        text = re.sub(pattern, repl.replace("{shared}", str(shared)), text)
    return text


def shell_commands(text: str) -> list[str]:
    """Command lines of a sh block: continuations joined, comments and `make` lines dropped."""
    commands, pending = [], ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if not line or line.startswith("#") or line.split()[0] == "make":
            continue
        commands.append(line)
    return commands


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PATH"] = f"{BIN}{os.pathsep}{e.get('PATH', '')}"
    e["PYTHONUNBUFFERED"] = "1"
    return e


def run(argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, env=env(), timeout=TIMEOUT_S, check=False
    )


def accidents_csv(path: Path, nrows: int = 2000) -> None:
    """A small stand-in for the US accidents data set: a State column and correlated others."""
    states = ["CA", "TX", "FL", "NY", "OH"]
    lines = ["ID,Severity,State,County,City,Timezone,Weather_Condition"]
    for i in range(nrows):
        s = states[i % len(states)]
        county = f"{s} County {i % 7}"
        tz = "US/Pacific" if s == "CA" else "US/Eastern"
        weather = ["Clear", "Light Rain", "Overcast", "Fog"][i % 4]
        lines.append(f"A-{i},{i % 4 + 1},{s},{county},{county} City {i % 3},{tz},{weather}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


_engines_cache: dict[str, str] = {}


def unavailable_engines() -> dict[str, str]:
    """Engines `attune bench engines` reports as unavailable here, with its reason."""
    if "done" not in _engines_cache:
        _engines_cache["done"] = ""
        r = run([str(BIN / "attune"), "bench", "engines", "--json"])
        assert r.returncode == 0, f"attune bench engines --json failed:\n{r.stdout}\n{r.stderr}"
        for line in r.stdout.splitlines():  # JSON lines, one per engine
            row = json.loads(line)
            if not row["available"]:
                _engines_cache[row["engine"]] = str(row["reason"])
    return {k: v for k, v in _engines_cache.items() if k != "done"}


def named_peers(command: str) -> set[str]:
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return set()
    names: set[str] = set()
    for i, w in enumerate(words[:-1]):
        if w == "--engines":
            for spec in words[i + 1].split(","):
                name = spec.split(":")[0]
                if name in PEERS:
                    names.add(name)
    return names


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("readme-shared")


BLOCKS = readme_blocks()


def test_readme_has_examples():
    assert {b.lang for b in BLOCKS} == {"python", "sh"}


def test_every_substitution_is_used():
    text = "\n".join(b.text for b in BLOCKS)
    unused = [p for p, _r, _w in SUBSTITUTIONS if not re.search(p, text)]
    assert not unused, f"substitutions that match no README block: {unused}"


@pytest.mark.parametrize("block", BLOCKS, ids=[f"README:{b.line}" for b in BLOCKS])
def test_readme_block(block: Block, shared: Path, tmp_path: Path):
    work = tmp_path / "work"
    work.mkdir()
    accidents_csv(work / "accidents.csv")
    code = substitute(block.text, shared)
    if block.lang == "python":
        r = run([sys.executable, "-c", code], cwd=work)
        assert r.returncode == 0, (
            f"README.md:{block.line} (python) exited {r.returncode}\n--- code\n{code}"
            f"--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}"
        )
        return
    commands = shell_commands(code)
    if not commands:
        pytest.skip(f"README.md:{block.line}: only make lines (the suite runs under make)")
    for command in commands:
        missing = {p: why for p, why in unavailable_engines().items() if p in named_peers(command)}
        if missing:
            pytest.skip(f"README.md:{block.line}: `attune bench engines` says {missing}")
    for command in commands:
        r = run(["bash", "-c", command], cwd=work)
        assert r.returncode == 0, (
            f"README.md:{block.line}: `{command}` exited {r.returncode}\n"
            f"--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}"
        )
