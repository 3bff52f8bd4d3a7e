"""`attune cache mrc --plot` draws the miss-ratio curve; `--timeline-plot` the controller's
timeline."""

import json

import pytest

import attune
from attune._cli_cache import plot_mrc
from attune.cli import main

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def saved_figures(monkeypatch):
    """Every matplotlib figure saved during the test, in order (the PNG is still written)."""
    from matplotlib.figure import Figure

    saved = []
    original = Figure.savefig

    def savefig(self, *args, **kwargs):
        saved.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return saved


def test_plot_mrc_draws_miss_ratio_against_cache_size(tmp_path, saved_figures):
    curve = [
        {"cache_bytes": 1 << 20, "miss_ratio": 1.0},
        {"cache_bytes": 2 << 20, "miss_ratio": 0.5},
        {"cache_bytes": 4 << 20, "miss_ratio": 0.1},
    ]
    plot_mrc(curve, str(tmp_path / "mrc.png"))
    assert (tmp_path / "mrc.png").read_bytes()[:8] == PNG
    (ax,) = saved_figures[0].axes
    assert ax.get_xlabel() == "block cache size (MiB)" and ax.get_ylabel() == "miss ratio"
    (line,) = ax.get_lines()
    assert list(line.get_xdata()) == [1, 2, 4]
    assert list(line.get_ydata()) == [1.0, 0.5, 0.1]


def test_plot_mrc_without_a_curve_is_a_clear_error(tmp_path):
    with pytest.raises(attune.InvalidArgumentError, match="no simulation round"):
        plot_mrc([], str(tmp_path / "mrc.png"))
    assert not (tmp_path / "mrc.png").exists()


def test_cli_plot_is_the_curve_and_timeline_plot_the_controller(tmp_path, capsys, saved_figures):
    path = str(tmp_path / "db")
    with attune.DB(path, enable_blob_files="false") as db:
        batch = attune.WriteBatch()
        for i in range(6000):
            batch.put(b"key%06d" % i, (b"value-%06d-" % i) * 40)
        db.write(batch)
        db.compact()
    argv = ["cache", "mrc", path, "--reads", "150000", "--memory-budget", "8MiB"]
    argv += ["--distribution", "uniform", "-o", "cache_sample_inv=1", "--json"]
    argv += ["--plot", str(tmp_path / "mrc.png")]
    argv += ["--timeline-plot", str(tmp_path / "timeline.png")]
    assert main(argv) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["mrc"], "150,000 reads close at least one window (65,536 block accesses each)"
    assert (tmp_path / "mrc.png").read_bytes()[:8] == PNG
    assert (tmp_path / "timeline.png").read_bytes()[:8] == PNG
    mrc, timeline = saved_figures
    (line,) = mrc.axes[0].get_lines()
    assert list(line.get_ydata()) == [p["miss_ratio"] for p in r["mrc"]]
    assert [ax.get_ylabel() for ax in timeline.axes] == [
        "block cache M_a (MiB)",
        "expected latency (ns)",
    ]


def test_help_names_both_plots(capsys):
    with pytest.raises(SystemExit):
        main(["cache", "mrc", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--plot FILE draw the miss-ratio curve" in text
    assert "--timeline-plot FILE" in text
