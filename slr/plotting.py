"""The book's house style, defined once and used by every chapter.

``use_style()`` sets the Matplotlib defaults; ``band`` draws a median with a 95% percentile band over
repeats (the paper's convention); ``COLORS`` names the colours used across the book.
``phase_portrait`` draws PGD on the manifold M (Lemma 7) over the risk on M; ``section5_figure`` draws
the four panels shared by the paper's Section 5 figures (4(a), 4(b), 5, 7(a), 7(b)) for a trajectory.
"""
from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

from slr import figcheck, manifold, risk

__all__ = ["COLORS", "MAX_WIDTH", "MIN_FONT_PT", "use_style", "band", "new_figure", "label_panels",
           "token_bars", "risk_panel", "phase_portrait", "section5_figure"]

# Figures are drawn for the page: at most MAX_WIDTH inches wide (the text column is about 660 px at a
# desktop width of 1280 px, and figures render at figure.dpi = 110, so 5.8 in is 638 px), so the page
# never shrinks them, and no text smaller than MIN_FONT_PT points (8 pt at 110 dpi is 12.2 px: the
# body's small print). tests/test_browser.py checks
# both on every figure of the built book; tests/test_plotting.py checks the code.
MAX_WIDTH = 5.8
MIN_FONT_PT = 8

COLORS = {
    "kappa": "#1f5fa8",   # key direction k / k_star
    "nu": "#d4572a",      # value direction v / v_star
    "risk": "#2b2b2b",
    "oracle": "#2a8c55",
    "linear": "#8e44ad",
    "null": "#7f7f7f",
    "bayes": "#b8860b",
    "signal": "#d62728",
    "noise": "#9ecae1",
}


def use_style():
    """Set the book's Matplotlib defaults (idempotent)."""
    mpl.rcParams.update({
        "figure.figsize": (6.4, 3.8),
        "figure.dpi": 110,
        "savefig.dpi": 150,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.titlesize": 11,
        "axes.labelsize": 10,
        "xtick.labelsize": 9,
        "ytick.labelsize": 9,
        "legend.fontsize": 9,
        "figure.titlesize": 12,
        "legend.frameon": False,
        "lines.linewidth": 1.8,
        "font.family": "DejaVu Sans",
    })
    _retina()


def _retina():
    """Inline figures at twice the pixel density (same size on the page, sharp on every screen)."""
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:  # pragma: no cover - IPython is there whenever figures are shown inline
        return
    if get_ipython() is not None:
        set_matplotlib_formats("retina")


def band(ax, x, values, *, color=None, label=None, q=(2.5, 97.5), axis=0, alpha=0.25, **kw):
    """Median of ``values`` over ``axis`` (the repeats) with a percentile band ``q`` (default 95%)."""
    values = np.asarray(values)
    med = np.median(values, axis=axis)
    lo, hi = np.percentile(values, q, axis=axis)
    (line,) = ax.plot(x, med, color=color, label=label, **kw)
    ax.fill_between(x, lo, hi, color=line.get_color(), alpha=alpha, linewidth=0)
    return line


def new_figure(nrows=1, ncols=1, *, width=None, height=None, **kw):
    """A figure with the house size (3.2 inches per panel across, 2.8 down unless given), laid out for
    the page: never wider than MAX_WIDTH. A single row of three or more panels wraps into rows of two
    (the axes come back as a flat array in the same order, unused cells removed); any other figure
    wider than MAX_WIDTH is narrowed to it."""
    use_style()
    width = width or 3.2 * ncols + 0.6
    height = height or 2.8 * nrows + 0.4
    if nrows == 1 and ncols >= 3:
        rows = -(-ncols // 2)
        fig, ax = plt.subplots(rows, 2, figsize=(min(width, MAX_WIDTH), 0.85 * height * rows),
                               constrained_layout=True, **kw)
        ax = ax.ravel()
        for extra in ax[ncols:]:
            extra.remove()
        fig.canvas.mpl_connect("draw_event", figcheck.record)
        return fig, ax[:ncols]
    fig, ax = plt.subplots(nrows, ncols, figsize=(min(width, MAX_WIDTH), height), constrained_layout=True,
                           **kw)
    fig.canvas.mpl_connect("draw_event", figcheck.record)  # is any data under a legend? (slr.figcheck)
    return fig, ax


def label_panels(axes, labels="abcdefgh"):
    """Put (a), (b), ... in the top-left corner of each panel."""
    for ax, lab in zip(np.ravel(axes), labels):
        ax.text(-0.02, 1.04, f"({lab})", transform=ax.transAxes, fontweight="bold", ha="right", va="bottom")


def token_bars(ax, values, informative, *, ylabel, title, offset=0.0, width=0.8, color=None, label=None):
    """Bars of one value per token l = 1..L, the informative token (0-based index) in the signal colour
    unless ``color`` is given; ``offset``/``width`` place several series side by side."""
    values = np.asarray(values)
    tokens = np.arange(1, values.size + 1)
    if color is None:
        color = [COLORS["signal"] if l == informative else COLORS["noise"] for l in range(values.size)]
    ax.bar(tokens + offset, values, width, color=color, label=label)
    ax.set(xlabel=r"token $\ell$", ylabel=ylabel, title=title)
    ax.set_xticks(tokens)
    return ax


def risk_panel(ax, log10_lam, log10_d, L, gamma, *, eps, lam_grid):
    """The oracle risk (Theorem 1) over ``lam_grid`` at d = 10^log10_d, with a marker at lam =
    10^log10_lam, and the optimal linear (Proposition 3), null and Bayes risks; a grey line at
    lam = d^(-1/4). Returns (oracle risk at lam, linear risk)."""
    from slr import risk

    d, lam, L = 10.0 ** log10_d, 10.0 ** log10_lam, int(L)
    curve = np.asarray(risk.oracle_risk(lam=lam_grid, gamma=gamma, d=d, L=L, eps=eps))
    r_or = float(risk.oracle_risk(lam=lam, gamma=gamma, d=d, L=L, eps=eps))
    r_lin = float(risk.linear_risk(gamma=gamma, L=L, eps=eps))
    ax.loglog(lam_grid, curve, color=COLORS["oracle"], label="oracle (Thm. 1)")
    ax.plot([lam], [r_or], "o", color=COLORS["oracle"])
    ax.axhline(r_lin, color=COLORS["linear"], label="optimal linear (Prop. 3)")
    ax.axhline(gamma ** 2 + eps ** 2, color=COLORS["null"], ls="--", label="null")
    ax.axhline(eps ** 2, color=COLORS["bayes"], ls=":", label="Bayes bound")
    ax.axvline(d ** -0.25, color="k", lw=0.8, alpha=0.4)
    ax.set(xlabel=r"$\lambda$", ylabel="risk",
           ylim=(eps ** 2 / 2, max(2 * (gamma ** 2 + eps ** 2), 1.5 * curve.min())))
    return r_or, r_lin


def phase_portrait(ax, *, lam, alpha, gamma, d, L, eps=0.0, n_arrows=17, n_grid=201):
    """The phase portrait of PGD on M (Lemma 7) at a constant ``lam`` and step ``alpha``: the risk on M
    (Lemma 6) as a grey background, the normalised displacement F(z) - z of the map as arrows, and the
    five fixed points (Propositions 9-10: minima at +-(1, 1), maxima at +-(1, -1), the saddle at 0).
    Returns the contour set (for a colour bar)."""
    grid = np.linspace(-1, 1, n_grid)
    KK, NN = np.meshgrid(grid, grid)
    R = np.asarray(risk.risk(KK, NN, 0.0, 0.0, 0.0, lam=lam, gamma=gamma, d=d, L=L, eps=eps))
    cs = ax.contourf(KK, NN, R, levels=30, cmap="Greys")
    A, B = np.meshgrid(*2 * [np.linspace(-0.95, 0.95, n_arrows)])
    Fa, Fb = manifold.manifold_map(A, B, lam=lam, alpha=alpha, gamma=gamma, d=d, L=L, eps=eps)
    U, W = np.asarray(Fa) - A, np.asarray(Fb) - B
    n = np.hypot(U, W) + 1e-300
    ax.quiver(A, B, U / n, W / n, color="0.35", scale=30, width=0.003)
    ax.plot([1, -1], [1, -1], "*", color=COLORS["oracle"], ms=13, label="minima", zorder=5)
    ax.plot([1, -1], [-1, 1], "^", color=COLORS["signal"], ms=9, label="maxima", zorder=5)
    ax.plot([0], [0], "X", color="k", ms=9, label="saddle", zorder=5)
    ax.set(xlim=(-1.03, 1.03), ylim=(-1.03, 1.03), xlabel=r"$\kappa$", ylabel=r"$\nu$", aspect="equal")
    return cs


def section5_figure(traj, title):
    """The four panels of the paper's Section 5 figures for a trajectory with repeats (a
    :class:`slr.pgd.Trajectory` with arrays (R, T)): (a) the excess risk, (b) |kappa_t| and |nu_t|,
    median and 95% band over the runs; (c) the (kappa_t, nu_t) paths of the runs with the smallest and
    the largest final |kappa| + |nu|; (d) the distance to M (exact zeros drawn at 1e-19). Returns
    ``(fig, axes)``."""
    t = np.asarray(traj.step)
    kappa, nu = np.asarray(traj.kappa), np.asarray(traj.nu)
    fig, ax = new_figure(1, 4, width=14.0, height=3.3)
    band(ax[0], t, traj.excess_risk, color=COLORS["risk"])
    ax[0].set(yscale="log", xlabel="step $t$", title="excess risk")
    band(ax[1], t, np.abs(kappa), color=COLORS["kappa"], label=r"$|\kappa_t|$")
    band(ax[1], t, np.abs(nu), color=COLORS["nu"], label=r"$|\nu_t|$")
    ax[1].set(ylim=(-0.03, 1.03), xlabel="step $t$", title="alignment with $k^\\star$, $v^\\star$")
    final = np.abs(kappa[:, -1]) + np.abs(nu[:, -1])
    for r, color in ((int(np.argmin(final)), COLORS["linear"]), (int(np.argmax(final)), COLORS["oracle"])):
        ax[2].plot(kappa[r], nu[r], color=color, lw=1.2, label=f"run {r}")
        ax[2].plot(kappa[r, 0], nu[r, 0], "o", color=color, ms=4)
        ax[2].plot(kappa[r, -1], nu[r, -1], "*", color=color, ms=10)
    ax[2].set(xlim=(-1.05, 1.05), ylim=(-1.05, 1.05), aspect="equal", xlabel=r"$\kappa$", ylabel=r"$\nu$",
              title=r"$(\kappa_t, \nu_t)$: o start, * end")
    band(ax[3], t, np.maximum(np.asarray(traj.dist_manifold), 1e-19), color=COLORS["signal"])
    ax[3].set(yscale="log", xlabel="step $t$", title=r"distance to $\mathcal{M}$")
    for a in (ax[0], ax[1], ax[3]):
        a.xaxis.set_major_locator(plt.MaxNLocator(4))
        a.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
    label_panels(ax)
    handles = [h for a in ax[1:3] for h in a.get_legend_handles_labels()[0]]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles))  # below the data
    fig.suptitle(title)
    return fig, ax
