"""Legends never cover data: a geometric check of every figure the book draws.

:func:`covered` measures, on a drawn figure, how much data lies under each legend (an axes legend or a
figure legend), in display coordinates: the points of every line (densified along its segments, so a
line crossing the box counts even between its samples), the markers of scatter plots and arrows, the
filled areas (bands, filled contours, meshes), bars and images, each clipped to its axes. A legend in
an empty corner or outside the axes covers nothing.

:func:`slr.plotting.new_figure` connects :func:`record` to each figure's draw event, so every figure a
chapter shows is measured when it is rendered; the measurements go to ``figures/<chapter>.json`` next
to the claims (:func:`slr.claims.claims_dir`), and the ledger test fails the book if a legend covers
data (``tests/test_ledger.py``).
"""
from __future__ import annotations

import json
import weakref

import numpy as np
from matplotlib.collections import LineCollection, PathCollection, PolyCollection, QuadMesh
from matplotlib.path import Path as MplPath
from matplotlib.transforms import Bbox

__all__ = ["covered", "record", "figures_dir", "load", "PAD_PX", "DENSIFY"]

PAD_PX = 2.0   # the legend's box is shrunk by this many pixels: touching its edge is not covering
DENSIFY = 24   # points per line segment


def _inside(points, box, clip):
    points = np.asarray(points, dtype=float).reshape(-1, 2)
    points = points[np.all(np.isfinite(points), axis=1)]
    inside = ((points[:, 0] > box.x0) & (points[:, 0] < box.x1) & (points[:, 1] > box.y0)
              & (points[:, 1] < box.y1))
    visible = ((points[:, 0] >= clip.x0) & (points[:, 0] <= clip.x1) & (points[:, 1] >= clip.y0)
               & (points[:, 1] <= clip.y1))
    return int(np.sum(inside & visible))


def _densify(xy):
    xy = np.asarray(xy, dtype=float)
    if len(xy) < 2:
        return xy
    t = np.linspace(0.0, 1.0, DENSIFY, endpoint=False)[None, :, None]
    seg = xy[:-1, None, :] + t * (xy[1:, None, :] - xy[:-1, None, :])
    return np.concatenate([seg.reshape(-1, 2), xy[-1:]])


def _grid(box, n=9):
    xs, ys = np.linspace(box.x0, box.x1, n), np.linspace(box.y0, box.y1, n)
    return np.stack(np.meshgrid(xs, ys), axis=-1).reshape(-1, 2)


def _axes_covered(ax, box, renderer) -> int:
    clip = ax.get_window_extent(renderer)
    if not clip.overlaps(box):
        return 0
    n = 0
    for line in ax.lines:
        if not line.get_visible():
            continue
        xy = line.get_transform().transform(line.get_xydata())
        n += _inside(xy if line.get_linestyle() in ("None", "none", " ", "") else _densify(xy), box, clip)
    grid = _grid(Bbox.intersection(box, clip) or box)
    for coll in ax.collections:
        if not coll.get_visible():
            continue
        offsets = coll.get_offsets()
        if isinstance(coll, PathCollection) or (len(offsets) > 1 and not isinstance(coll, LineCollection)):
            n += _inside(coll.get_offset_transform().transform(offsets), box, clip)
            continue
        for path in coll.get_paths():
            path = path.transformed(coll.get_transform())
            if isinstance(coll, LineCollection) or getattr(coll, "filled", True) is False:
                n += _inside(_densify(path.vertices), box, clip)
            elif isinstance(coll, (PolyCollection, QuadMesh)) or len(path.vertices) > 2:
                n += int(np.sum(MplPath(path.vertices, path.codes).contains_points(grid)))
    for patch in ax.patches:
        if patch.get_visible() and patch.get_window_extent(renderer).overlaps(box):
            n += 1
    for image in ax.images:
        if image.get_visible() and image.get_window_extent(renderer).overlaps(box):
            n += 1
    return n


def covered(fig, renderer=None) -> list[dict]:
    """For each legend of ``fig`` (axes legends, then figure legends): how many data points, filled
    sample points, bars or images lie under it (0: it covers nothing). Draws the figure if needed."""
    if renderer is None:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
    out = []
    legends = [(ax.get_legend(), [ax]) for ax in fig.axes if ax.get_legend() is not None]
    legends += [(leg, fig.axes) for leg in fig.legends]
    for leg, axes in legends:
        if not leg.get_visible():
            continue
        box = leg.get_window_extent(renderer).padded(-PAD_PX)
        count = sum(_axes_covered(ax, box, renderer) for ax in axes)
        title = next((ax.get_title() for ax in axes if ax.get_title()), "")
        out.append({"legend": "figure" if len(axes) > 1 or leg in fig.legends else "axes",
                    "axes_title": title, "covered": count})
    return out


def figures_dir():
    """Where the measurements go: ``figures/`` under :func:`slr.claims.claims_dir`."""
    from slr import claims
    return claims.claims_dir() / "figures"


_ORDER: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def record(event) -> None:
    """Draw-event callback: measure the figure and store it under the current chapter
    (:func:`slr.claims.current_chapter`); outside a chapter it does nothing."""
    from slr import claims
    chapter = claims.current_chapter()
    if chapter is None:
        return
    fig = event.canvas.figure
    path = figures_dir() / f"{chapter}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():      # claims.start(chapter) removed it: a new run of the chapter
        _ORDER.clear()
    records = json.loads(path.read_text()) if path.exists() else []
    if fig not in _ORDER:
        _ORDER[fig] = len(records)
        records.append(None)
    records[_ORDER[fig]] = {"figure": _ORDER[fig] + 1, "legends": covered(fig, event.renderer)}
    path.write_text(json.dumps(records, indent=1) + "\n")


def load(directory=None) -> dict:
    """Every chapter's figure measurements: {chapter: [{figure, legends: [...]}, ...]}."""
    from pathlib import Path
    root = Path(directory) if directory is not None else figures_dir()
    return {p.stem: json.loads(p.read_text()) for p in sorted(root.glob("*.json"))}
