"""Every file, results file and link the docs name exists in the repo.

Scans README.md, docs/*.md and docs/formats/*.md (docs/BENCHMARKS.md and docs/bench/ are generated
from benches/figures.toml and checked by the report's own tests) for:

- relative markdown links `[text](path#anchor)`: the path exists next to the page, and the anchor
  is a heading of the target page;
- paths that start at the repo root (`crates/...`, `python/...`, `benches/...`, `docs/...`,
  `fuzz/...`), backticked or not, in code blocks too: the path exists;
- backticked results files (`name.jsonl`): a file of that name is in benches/results/;
- other backticked file names with a source extension (`table/source.rs`, `tests/crash.rs`):
  some tracked path ends with them.

Tokens with placeholders or globs (`<name>`, `*`, `{a,b}`) are skipped. Needs no attune import.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROOT_DIRS = ("crates/", "python/", "benches/", "docs/", "fuzz/")
SOURCE_EXT = (".rs", ".py", ".md", ".sh", ".toml", ".png", ".svg")
# Files a program writes at run time, named in the docs but never tracked.
RUNTIME_FILES = {"schema.json", "MANIFEST", "CURRENT", "LOCK"}
# Folders cargo-fuzz creates (git-ignored).
RUNTIME_DIRS = ("fuzz/corpus", "fuzz/artifacts")


def pages() -> list[Path]:
    docs = ROOT / "docs"
    found = [ROOT / "README.md"]
    found += sorted(p for p in docs.glob("*.md") if p.name != "BENCHMARKS.md")
    found += sorted((docs / "formats").glob("*.md"))
    return found


def tracked() -> list[str]:
    try:
        out = subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
        files = out.split()
    except (OSError, subprocess.CalledProcessError):
        roots = [ROOT / d.rstrip("/") for d in ROOT_DIRS]
        files = [str(p.relative_to(ROOT)) for r in roots for p in r.rglob("*") if p.is_file()]
    dirs = {str(Path(f).parent) + "/" for f in files}
    for d in list(dirs):
        parts = d.rstrip("/").split("/")
        dirs.update("/".join(parts[:i]) + "/" for i in range(1, len(parts)))
    return files + sorted(dirs)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    heads = re.findall(r"^#+\s+(.*)$", page.read_text(), flags=re.MULTILINE)
    found = {slug(h) for h in heads}
    found |= set(re.findall(r'<a (?:name|id)="([^"]+)"', page.read_text()))
    return found


def strip_code_blocks(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


# A root path not followed by a placeholder or a glob (`tests/test_cache_*.py`, `<target>/`).
ROOT_PATH = re.compile(
    r"(?<![\w/.-])((?:crates|python|benches|docs|fuzz)/[\w./-]*[\w/])(?![\w./-]*[*<{])"
)


def problems(page: Path, files: list[str]) -> list[str]:
    full = page.read_text()
    text = strip_code_blocks(full)
    rel = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
    bad = []
    for path in sorted(set(ROOT_PATH.findall(full))):
        if not path.startswith(RUNTIME_DIRS) and not (ROOT / path).exists():
            bad.append(f"{rel}: `{path}` does not exist")
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve()
        if not dest.exists():
            bad.append(f"{rel}: link to missing {target}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{rel}: link to missing section {target}")
    results = {p.name for p in (ROOT / "benches" / "results").iterdir()}
    for token in re.findall(r"`([^`\s]+)`", text):
        token = token.split("::")[0].rstrip(".,:;")
        if re.search(r"[<>*{}$]", token) or token in RUNTIME_FILES:
            continue
        if token.startswith(ROOT_DIRS):
            continue  # checked above
        if token.endswith(".jsonl") and "/" not in token:
            if token not in results:
                bad.append(f"{rel}: results file `{token}` not in benches/results/")
        elif (
            token.endswith(SOURCE_EXT)
            and not token.startswith(("/", "../", "~"))
            and not any(f == token or f.endswith("/" + token) for f in files)
        ):
            bad.append(f"{rel}: no tracked file ends with `{token}`")
    return bad


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_references_exist(page: Path) -> None:
    bad = problems(page, tracked())
    assert not bad, "\n".join(bad)


def test_the_checker_reports_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n")
    page = tmp_path / "page.md"
    page.write_text(
        "See [other](other.md#other-page), `docs/kv.md`, `kv-micro.jsonl` and `table/source.rs`.\n"
        "Gone: [x](missing.md), [y](other.md#no-such-section), `docs/no-such.md`,\n"
        "`no-such-results.jsonl`, `no_such_module.rs`; skipped: `tests/test_*.py`, `<dir>/x.rs`.\n"
    )
    bad = problems(page, tracked())
    assert len(bad) == 5, bad
