"""slr.plotting: the house helpers draw what they say (token bars, risk panels, the phase portrait on M,
the Section 5 four-panel figure)."""
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from slr import pgd, plotting  # noqa: E402

G = math.sqrt(0.5)


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


def test_phase_portrait_draws_risk_arrows_and_the_five_fixed_points():
    fig, ax = plotting.new_figure()
    cs = plotting.phase_portrait(ax, lam=0.1, alpha=0.04, gamma=G, d=400, L=10, n_arrows=5, n_grid=21)
    assert cs.levels.size > 2 and len(ax.collections) >= 2            # contour + quiver
    pts = {tuple(np.round(xy, 6)) for line in ax.lines for xy in np.c_[line.get_xdata(), line.get_ydata()]}
    assert pts == {(1, 1), (-1, -1), (1, -1), (-1, 1), (0, 0)}
    plt.close(fig)


def test_section5_figure_has_four_labelled_panels():
    step = np.arange(0, 30, 10)
    z = np.zeros((3, step.size))
    traj = pgd.Trajectory(step, z + 0.5, z + 0.5, z, z + 0.1, z, z + 0.2)
    fig, ax = plotting.section5_figure(traj, "test")
    assert len(ax) == 4 and fig._suptitle.get_text() == "test"
    assert ax[0].get_yscale() == "log" and ax[3].get_yscale() == "log"
    assert np.allclose(ax[3].lines[0].get_ydata(), 0.1)                # distance to M = |eta|
    assert len(fig.legends) == 1 and len(fig.legends[0].get_texts()) == 4   # one legend, off the data
    assert all(a.get_legend() is None for a in ax)
    plt.close(fig)


def test_new_figure_is_laid_out_for_the_page():
    """A row of three or four panels wraps into rows of two, nothing is wider than MAX_WIDTH; the
    control: the width asked for (14 inches) is above it, so the cap is doing the work."""
    fig, ax = plotting.new_figure(1, 4, width=14.0, height=3.3)
    assert ax.shape == (4,) and len(fig.axes) == 4
    assert fig.get_figwidth() <= plotting.MAX_WIDTH < 14.0
    rows = sorted({round(a.get_position().y0, 3) for a in ax})
    assert len(rows) == 2
    plt.close(fig)
    fig, ax = plotting.new_figure(1, 3, sharey=True)
    assert ax.shape == (3,) and len(fig.axes) == 3
    plt.close(fig)
    fig, ax = plotting.new_figure(3, 3, width=9.6, height=7.6)
    assert ax.shape == (3, 3) and fig.get_figwidth() == plotting.MAX_WIDTH
    plt.close(fig)
    fig, ax = plotting.new_figure(1, 2)
    assert ax.shape == (2,) and fig.get_figwidth() == min(3.2 * 2 + 0.6, plotting.MAX_WIDTH)
    plt.close(fig)


def test_house_style_fonts_are_readable():
    plotting.use_style()
    sizes = [matplotlib.rcParams[k] for k in ("axes.titlesize", "axes.labelsize", "xtick.labelsize",
                                               "ytick.labelsize", "legend.fontsize")]
    assert min(sizes) >= plotting.MIN_FONT_PT
