"""Sphinx extension: a label written just before a ``{prf:proof}`` block becomes an anchor on the page.

sphinx-proof 0.4 wraps a proof in a ``proof_node`` whose HTML visitor writes no id, and gives the inner
admonition the fixed id ``proof``. docutils moves a preceding ``(proof-lem-4)=`` target onto the
``proof_node``, so ``{ref}`proof of Lemma 4 <proof-lem-4>``` resolves but lands on no anchor. This
extension moves the proof node's own ids onto the admonition that is written, first, so that every
such link lands on its proof (tests/test_browser.py checks every internal anchor).
"""
from __future__ import annotations

from docutils import nodes


def move_ids(app, doctree, docname):
    try:
        from sphinx_proof.nodes import proof_node
    except ImportError:  # pragma: no cover - sphinx-proof is a dependency of the book
        return
    for node in doctree.findall(proof_node):
        labels = [i for i in node.get("ids", []) if i not in ("proof",)]
        inner = next(iter(node.findall(nodes.admonition)), None)
        if labels and inner is not None:
            inner["ids"] = labels + [i for i in inner["ids"] if i not in labels]
            node["ids"] = []


def setup(app):
    app.connect("doctree-resolved", move_ids)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
