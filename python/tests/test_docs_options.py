"""docs/kv.md's option table names every option the engine accepts, each once.

The table is the reference users read; `OPTION_NAMES` (from the Rust `options.rs`) is what
`attune.DB` accepts. This test keeps the two equal, so an option added to the engine without a row
(or a row left behind after a rename) fails the suite.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import attune

KV_MD = Path(__file__).resolve().parents[2] / "docs" / "kv.md"


def option_table_names() -> list[str]:
    """First-column names of the table under the `## Options` heading of docs/kv.md."""
    lines = KV_MD.read_text(encoding="utf-8").splitlines()
    start = lines.index("## Options")
    names: list[str] = []
    in_table = False
    for line in lines[start + 1 :]:
        if line.startswith("#"):
            break
        if not line.startswith("|"):
            if in_table:
                break
            continue
        in_table = True
        first = line.strip("|").split("|")[0].strip().strip("`")
        if first == "option" or re.fullmatch(r":?-+:?", first):
            continue
        names.append(first)
    return names


def test_option_table_lists_every_option_once():
    names = option_table_names()
    repeated = sorted(n for n, c in Counter(names).items() if c > 1)
    assert not repeated, f"options listed more than once in docs/kv.md: {repeated}"
    documented, accepted = set(names), set(attune.OPTION_NAMES)
    assert documented == accepted, (
        f"missing from docs/kv.md: {sorted(accepted - documented)}; "
        f"not options: {sorted(documented - accepted)}"
    )
