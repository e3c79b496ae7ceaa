"""slr.plotting: the house helpers draw what they say."""
import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402

from slr import plotting  # noqa: E402


def test_token_bars_colours_the_informative_token():
    fig, ax = plotting.new_figure()
    plotting.token_bars(ax, [0.5, 3.0, -1.0], 1, ylabel="y", title="t")
    bars = ax.patches
    assert [b.get_height() for b in bars] == [0.5, 3.0, -1.0]
    assert [b.get_x() + b.get_width() / 2 for b in bars] == [1.0, 2.0, 3.0]
    signal = matplotlib.colors.to_rgba(plotting.COLORS["signal"])
    assert [b.get_facecolor() == signal for b in bars] == [False, True, False]
    assert list(ax.get_xticks()) == [1, 2, 3] and ax.get_title() == "t"
    matplotlib.pyplot.close(fig)


def test_risk_panel_returns_the_closed_forms_it_draws():
    import math
    from slr import risk
    fig, ax = plotting.new_figure()
    g = math.sqrt(0.5)
    r_or, r_lin = plotting.risk_panel(ax, -1.0, 4.0, 10, g, eps=0.1, lam_grid=np.logspace(-3, 1, 50))
    assert r_or == float(risk.oracle_risk(lam=0.1, gamma=g, d=1e4, L=10, eps=0.1))
    assert r_lin == float(risk.linear_risk(gamma=g, L=10, eps=0.1))
    assert len(ax.lines) == 6          # curve, marker, linear, null, Bayes, the d^(-1/4) line
    matplotlib.pyplot.close(fig)
