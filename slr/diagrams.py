"""Drawings of the book's objects that are not data plots.

``attention_schematic`` draws one attention layer read at its [CLS] (register) row, Eq. (5): the [CLS]
embedding makes the query, each token makes a key and a value, the scores are turned into weights by a
softmax (Eq. 2) or component-wise by erf (Eq. 3), and the output is the weighted sum of the values.
Laid out for the page: ``plotting.MAX_WIDTH`` inches wide, no text below ``plotting.MIN_FONT_PT``.
"""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyBboxPatch

from slr import plotting

__all__ = ["attention_schematic", "schematic_weights"]

FONT_PT = 9          # every label of the schematic (>= plotting.MIN_FONT_PT)


def schematic_weights(scores):
    """The two weight rules of the schematic for the scores s_l = lam' X_l^T k: ``(softmax(s),
    erf(s))``, two arrays of shape (L,)."""
    s = np.asarray(scores, dtype=float)
    w_soft = np.exp(s - s.max())
    return w_soft / w_soft.sum(), np.array([math.erf(x) for x in s])


def _box(ax, x, y, text, *, width, height=0.6, edge="0.3", face="white", **kw):
    ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height,
                                boxstyle="round,pad=0.04,rounding_size=0.12", fc=face, ec=edge, lw=1.2))
    ax.text(x, y, text, ha="center", va="center", fontsize=FONT_PT, **kw)


def _arrow(ax, xy_from, xy_to, **kw):
    ax.annotate("", xy=xy_to, xytext=xy_from,
                arrowprops=dict(arrowstyle="-|>", color=kw.pop("color", "0.35"), lw=1.0, shrinkA=0, shrinkB=0,
                                mutation_scale=9, **kw))


def attention_schematic(scores=(0.5, -0.8, 2.5, 0.2, -0.4), *, informative: int = 2):
    """Draw one attention layer at its [CLS] row (Eq. 5) with p = o = 1, for a sequence whose tokens
    have the scores ``scores`` (s_l = lam' X_l^T k, one per token, 2 to 8 of them); ``informative`` is
    the 0-based index of the informative token (drawn in the signal colour).

    Rows, bottom to top: the [CLS] embedding c and the tokens X_l; the query q = W_Q^T c and the scores
    s_l = lam q^T W_K^T X_l; the weights w_l, softmax(s)_l and erf(s_l) side by side (bars); the
    values X_l^T W_V W_O; the output sum_l w_l X_l^T W_V W_O. Returns ``(fig, ax, weights)`` with
    ``weights = {"softmax": ..., "erf": ...}`` the bar heights drawn."""
    s = np.asarray(scores, dtype=float)
    if s.ndim != 1 or not 2 <= s.size <= 8 or not np.all(np.isfinite(s)):
        raise ValueError(f"scores must be 2 to 8 finite numbers, got {scores!r}")
    if isinstance(informative, bool) or not isinstance(informative, (int, np.integer)) \
            or not 0 <= informative < s.size:
        raise ValueError(f"informative must be an integer in [0, {s.size - 1}], got {informative!r}")
    w_soft, w_erf = schematic_weights(s)
    L = s.size
    plotting.use_style()
    fig, ax = plt.subplots(figsize=(plotting.MAX_WIDTH, 4.1), constrained_layout=True)
    ax.set(xlim=(0, 10.2), ylim=(-0.05, 7.0))
    ax.axis("off")
    xs = 2.9 + (9.6 - 2.9) * np.arange(L) / max(L - 1, 1)      # token columns
    col_w = min(1.1, 0.8 * (xs[1] - xs[0]))
    y_tok, y_score, y_base, y_val, y_out = 0.35, 1.75, 3.35, 5.05, 6.45
    signal, soft_c, erf_c = plotting.COLORS["signal"], plotting.COLORS["kappa"], plotting.COLORS["nu"]
    # row 1: the [CLS] embedding and the tokens
    _box(ax, 1.0, y_tok, "[CLS]  $c$", width=1.5, face="0.92")
    for l, x in enumerate(xs):
        inf = l == informative
        _box(ax, x, y_tok, f"$X_{{{l + 1}}}$", width=col_w, edge=signal if inf else "0.3",
             face="#fbe3e3" if inf else "white", color=signal if inf else "k")
        _arrow(ax, (x, y_tok + 0.34), (x, y_score - 0.3))
    # row 2: the query and the scores
    _box(ax, 1.0, y_score, "query\n$q = W_Q^\\top c$", width=1.7, height=0.85)
    _arrow(ax, (1.0, y_tok + 0.34), (1.0, y_score - 0.45))
    _arrow(ax, (1.9, y_score), (xs[0] - col_w / 2 - 0.05, y_score), linestyle="--")
    for l, x in enumerate(xs):
        ax.text(x, y_score, f"{s[l]:.1f}", ha="center", va="center", fontsize=FONT_PT,
                bbox=dict(boxstyle="round,pad=0.25", fc="white", ec="0.6", lw=0.8))
    ax.text(xs[-1] + col_w / 2 + 0.05, y_score + 0.45, r"scores $s_\ell = \lambda\, q^\top W_K^\top X_\ell$",
            ha="right", va="bottom", fontsize=FONT_PT)
    # row 3: the weights, softmax and erf side by side
    ax.plot([xs[0] - col_w / 2, xs[-1] + col_w / 2], [y_base, y_base], color="0.3", lw=0.8)
    bw, scale = col_w * 0.36, 1.15
    for l, x in enumerate(xs):
        ax.bar(x - bw / 2, scale * w_soft[l], bw, bottom=y_base, color=soft_c)
        ax.bar(x + bw / 2, scale * w_erf[l], bw, bottom=y_base, color=erf_c)
    ax.text(1.0, y_base + 0.55, "weights $w_\\ell$", ha="center", va="center", fontsize=FONT_PT)
    for dy, name, color in ((0.05, r"softmax$(s)_\ell$", soft_c), (-0.4, r"erf$(s_\ell)$", erf_c)):
        ax.add_patch(plt.Rectangle((0.1, y_base + dy - 0.12), 0.25, 0.24, color=color))
        ax.text(0.45, y_base + dy, name, ha="left", va="center", fontsize=FONT_PT)
    # row 4: the values; row 5: the output
    ax.text(1.0, y_val, "values\n$X_\\ell^\\top W_V W_O$", ha="center", va="center", fontsize=FONT_PT)
    for l, x in enumerate(xs):
        ax.text(x, y_val, f"$\\times\\, X_{{{l + 1}}}^\\top v$", ha="center", va="center",
                fontsize=FONT_PT, color=signal if l == informative else "k")
        _arrow(ax, (x, y_val + 0.25), (xs.mean() + 0.35 * (x - xs.mean()), y_out - 0.33))
    _box(ax, xs.mean(), y_out, r"output  $\sum_\ell w_\ell\, X_\ell^\top v$  ([CLS] row, Eq. 5)",
         width=4.9, face="#eef3fa")
    return fig, ax, {"softmax": w_soft, "erf": w_erf}
