"""slr.plotting: the house style, the phase portrait on M and the Section 5 four-panel figure."""
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from slr import pgd, plotting  # noqa: E402

G = math.sqrt(0.5)


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
    plt.close(fig)
