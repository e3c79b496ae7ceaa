"""slr.figcheck: the measure of data under a legend, with its controls (a legend over a line, a band,
markers, bars; the same legends moved to an empty corner or outside the axes cover nothing)."""
import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
from slr import claims, figcheck, plotting  # noqa: E402

X = np.linspace(0, 1, 50)


def _one(kind, loc):
    fig, ax = plotting.new_figure()
    if kind == "line":
        ax.plot(X, X, label="y = x")
    elif kind == "band":
        ax.fill_between(X, 0, 1, alpha=0.3, label="band")
        ax.set_ylim(0, 1)
    elif kind == "scatter":
        ax.scatter(X, X, label="points")
    elif kind == "bars":
        ax.bar(np.arange(5), np.ones(5), label="bars")
    if loc == "outside":
        fig.legend(loc="outside lower center")
    else:
        ax.legend(loc=loc)
    out = figcheck.covered(fig)
    matplotlib.pyplot.close(fig)
    return out


@pytest.mark.parametrize("kind", ["line", "band", "scatter", "bars"])
def test_a_legend_over_data_is_caught(kind):
    loc = "upper center" if kind == "bars" else "center"
    (leg,) = _one(kind, loc)
    assert leg["covered"] > 0


@pytest.mark.parametrize("kind, loc", [("line", "upper left"), ("line", "lower right"),
                                       ("scatter", "upper left"), ("line", "outside"),
                                       ("band", "outside")])
def test_a_legend_away_from_data_covers_nothing(kind, loc):
    (leg,) = _one(kind, loc)
    assert leg["covered"] == 0


def test_a_line_crossing_the_box_between_samples_counts():
    fig, ax = plotting.new_figure()
    ax.plot([0, 1], [0, 1], label="two points")      # no sample near the centre
    ax.legend(loc="center")
    (leg,) = figcheck.covered(fig)
    assert leg["covered"] > 0
    matplotlib.pyplot.close(fig)


def test_figures_are_recorded_per_chapter(tmp_path, monkeypatch):
    monkeypatch.setenv("SLR_CLAIMS_DIR", str(tmp_path))
    claims.start("figcheck-test")
    for loc in ("center", "upper left"):
        fig, ax = plotting.new_figure()
        ax.plot(X, X, label="y = x")
        ax.legend(loc=loc)
        fig.canvas.draw()
        fig.canvas.draw()                               # a second draw replaces, never appends
        matplotlib.pyplot.close(fig)
    recs = figcheck.load()["figcheck-test"]
    assert [r["figure"] for r in recs] == [1, 2]
    assert recs[0]["legends"][0]["covered"] > 0 and recs[1]["legends"][0]["covered"] == 0
    claims.start("figcheck-test")                       # a new run of the chapter starts afresh
    assert not (tmp_path / "figures" / "figcheck-test.json").exists()
    claims.stop()
    fig, ax = plotting.new_figure()
    fig.canvas.draw()                                   # outside a chapter: nothing is recorded
    matplotlib.pyplot.close(fig)
    assert figcheck.load() == {}
