"""slr.diagrams: the attention schematic draws the weights it says, fits the page and is legible."""
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from slr import diagrams, plotting  # noqa: E402


def test_weights_are_softmax_and_erf_of_the_scores():
    s = np.array([0.5, -0.8, 2.5])
    w_soft, w_erf = diagrams.schematic_weights(s)
    assert np.isclose(w_soft.sum(), 1.0) and np.allclose(w_soft, np.exp(s) / np.exp(s).sum())
    assert np.allclose(w_erf, [math.erf(x) for x in s])
    assert w_erf[1] < 0 < w_soft[1]                    # erf weights may be negative, softmax never


def test_schematic_draws_both_weight_rows_and_every_token():
    s = (0.5, -0.8, 2.5, 0.2, -0.4)
    fig, ax, w = diagrams.attention_schematic(s, informative=2)
    heights = np.array([p.get_height() for p in ax.patches if isinstance(p, matplotlib.patches.Rectangle)
                        and p.get_width() < 0.5 and p.get_height() != 0.24])
    expected = np.concatenate([[a, b] for a, b in zip(w["softmax"], w["erf"])])
    assert np.allclose(heights / heights[4], expected / expected[4])     # bars proportional to weights
    texts = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    assert all(f"$X_{{{i}}}$" in texts for i in range(1, 6))
    assert any("[CLS]" in t for t in texts) and any("query" in t for t in texts)
    plt.close(fig)


def test_schematic_fits_the_page_and_no_label_is_small():
    fig, _, _ = diagrams.attention_schematic()
    assert fig.get_figwidth() <= plotting.MAX_WIDTH + 1e-9
    sizes = [t.get_fontsize() for t in fig.findobj(matplotlib.text.Text) if t.get_text().strip()]
    assert sizes and min(sizes) >= plotting.MIN_FONT_PT
    plt.close(fig)


@pytest.mark.parametrize("kw", [dict(scores=(1.0,)), dict(scores=(1.0, np.nan)),
                                dict(scores=(1.0, 2.0), informative=2), dict(scores=(1.0, 2.0), informative=1.0)])
def test_schematic_rejects_bad_arguments(kw):
    with pytest.raises(ValueError, match="scores|informative"):
        diagrams.attention_schematic(**kw)
