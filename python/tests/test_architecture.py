"""The crate graph drawn in docs/ARCHITECTURE.md is the one the Cargo.toml files declare.

The doc's crate table lists, for each crate, the attune crates it may depend on. This test reads that
table and every `crates/*/Cargo.toml` (normal, dev and build dependencies alike) and fails on an
arrow the table does not allow, a crate the table does not list, or a listed crate that does not
exist: a new arrow is a design decision made in the doc and the manifest together.
"""

from __future__ import annotations

import re
from pathlib import Path

try:  # Python 3.11+; on 3.10 the `tomli` package is the same parser.
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ARCHITECTURE.md"
ROW = re.compile(r"^\| `(attune-[a-z-]+)` \|[^|]*\| ([^|]*) \|\s*$")


def allowed_arrows() -> dict[str, set[str]]:
    table: dict[str, set[str]] = {}
    for line in DOC.read_text().splitlines():
        m = ROW.match(line)
        if m:
            table[m.group(1)] = set(re.findall(r"`(attune-[a-z-]+)`", m.group(2)))
    return table


def declared_arrows() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for manifest in sorted(ROOT.glob("crates/*/Cargo.toml")):
        data = tomllib.loads(manifest.read_text())
        deps: set[str] = set()
        for section in ("dependencies", "dev-dependencies", "build-dependencies"):
            deps |= {d for d in data.get(section, {}) if d.startswith("attune-")}
        graph[data["package"]["name"]] = deps
    return graph


def test_the_doc_lists_every_crate_and_no_other():
    allowed, declared = allowed_arrows(), declared_arrows()
    assert allowed, f"no crate table found in {DOC}"
    assert set(allowed) == set(declared), (
        f"crates in the doc but not in crates/: {sorted(set(allowed) - set(declared))}; "
        f"in crates/ but not in the doc: {sorted(set(declared) - set(allowed))}"
    )


def test_every_dependency_is_an_allowed_arrow():
    allowed, declared = allowed_arrows(), declared_arrows()
    extra = {c: sorted(d - allowed.get(c, set())) for c, d in declared.items()}
    extra = {c: d for c, d in extra.items() if d}
    assert not extra, f"dependencies docs/ARCHITECTURE.md does not allow: {extra}"


def test_the_allowed_graph_has_no_loop():
    allowed = allowed_arrows()
    state: dict[str, int] = {}

    def visit(crate: str, path: list[str]) -> None:
        if state.get(crate) == 2:
            return
        assert state.get(crate) != 1, f"loop in docs/ARCHITECTURE.md: {' -> '.join(path)}"
        state[crate] = 1
        for dep in sorted(allowed.get(crate, ())):
            visit(dep, [*path, dep])
        state[crate] = 2

    for crate in sorted(allowed):
        visit(crate, [crate])
