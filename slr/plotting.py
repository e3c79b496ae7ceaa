"""The book's house style, defined once and used by every chapter.

``use_style()`` sets the Matplotlib defaults; ``band`` draws a median with a 95% percentile band over
repeats (the paper's convention); ``COLORS`` names the colours used across the book.
"""
from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

__all__ = ["COLORS", "use_style", "band", "new_figure", "label_panels", "token_bars", "risk_panel"]

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
        "legend.fontsize": 9,
        "legend.frameon": False,
        "lines.linewidth": 1.8,
        "font.family": "DejaVu Sans",
    })


def band(ax, x, values, *, color=None, label=None, q=(2.5, 97.5), axis=0, alpha=0.25, **kw):
    """Median of ``values`` over ``axis`` (the repeats) with a percentile band ``q`` (default 95%)."""
    values = np.asarray(values)
    med = np.median(values, axis=axis)
    lo, hi = np.percentile(values, q, axis=axis)
    (line,) = ax.plot(x, med, color=color, label=label, **kw)
    ax.fill_between(x, lo, hi, color=line.get_color(), alpha=alpha, linewidth=0)
    return line


def new_figure(nrows=1, ncols=1, *, width=None, height=None, **kw):
    """A figure with the house size: 3.2 inches per panel across, 2.8 down unless given."""
    use_style()
    width = width or 3.2 * ncols + 0.6
    height = height or 2.8 * nrows + 0.4
    return plt.subplots(nrows, ncols, figsize=(width, height), constrained_layout=True, **kw)


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
