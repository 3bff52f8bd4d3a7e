"""A verb whose optional dependency is missing says which package to install, before any work,
instead of raising ModuleNotFoundError at the end. The import is made to fail in-process."""

import json
import sys

import pytest

from attune.cli import main


@pytest.fixture
def without(monkeypatch):
    """without(name): importing `name` (and its submodules) raises ImportError for this test."""

    def hide(name):
        for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            monkeypatch.delitem(sys.modules, mod)
        monkeypatch.setitem(sys.modules, name, None)  # `import name` now raises ImportError

    return hide


@pytest.mark.parametrize(
    "argv, package",
    [
        (["cache", "mrc", "{tmp}/no-db", "--plot", "{tmp}/p.png"], "matplotlib"),
        (["cache", "mrc", "{tmp}/no-db", "--timeline-plot", "{tmp}/p.png"], "matplotlib"),
        (["bench", "report", "{tmp}/none.jsonl", "--out", "{tmp}/r.md"], "matplotlib"),
        (["split", "{tmp}/none.csv", "--out", "{tmp}/o"], "duckdb"),
    ],
)
def test_missing_optional_package_is_named_before_any_work(
    tmp_path, capsys, without, argv, package
):
    without(package)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("attune: error: ") and "Traceback" not in err
    assert f"pip install {package}" in err and "[dev]" in err
    # The check came first: the missing database / input file was never reached.
    assert "not an Attune database" not in err and "none." not in err


def test_missing_optional_package_under_json(tmp_path, capsys, without):
    without("matplotlib")
    code = main(["cache", "mrc", str(tmp_path / "db"), "--plot", "p.png", "--json"])
    assert code == 1
    obj = json.loads(capsys.readouterr().out)
    assert obj["error"] == "MissingDependencyError" and "matplotlib" in obj["message"]


def test_ibis_is_named_by_its_pip_package(without):
    from attune._cli_deps import MissingDependencyError, require

    without("ibis")
    with pytest.raises(MissingDependencyError, match="pip install ibis-framework"):
        require("attune.frames.connect", "ibis")
