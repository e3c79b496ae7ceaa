"""Sphinx extension: the "Claims and checks" ledger and the map of the paper's results.

Chapters record every checked claim with :func:`slr.claims.check` while they execute (in nbval or in
the book build) into ``slr.claims.claims_dir()``. After every page has been read (so every chapter
has executed), this extension fills

- ``{claims-ledger}``: one section per numbered result or figure of the paper (:mod:`paper_map`), with a
  table of its claims (statement, method and error rate, measured value, test, negative control,
  status), then the
  book's own claims chapter by chapter; each section links to the statement, and the statement's
  block links back to its section;
- ``{paper-map}``: the dependency graph of the paper's results, drawn by Graphviz (``dot``, from
  Debian's package) as an inline SVG: an arrow where a proof uses a result, each node coloured by the
  status of its claims and linked to its statement.

Nothing is executed twice: the ledger only reads what the chapters recorded.
"""
from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from docutils import nodes
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

sys.path.insert(0, str(Path(__file__).resolve().parent))
import paper_map  # noqa: E402

LEDGER_DOC = "book/claims"
COLOURS = {"ok": ("#d8f0d2", "#2e7d32"), "failing": ("#f8d3d0", "#c62828"), "none": ("#eeeeee", "#9e9e9e")}
WORDS = {"ok": "every claim holds and every control fails", "failing": "a claim fails",
         "none": "no claim checks it yet"}


class ledger_node(nodes.General, nodes.Element):
    pass


class map_node(nodes.General, nodes.Element):
    pass


class LedgerDirective(SphinxDirective):
    def run(self):
        return [ledger_node()]


class MapDirective(SphinxDirective):
    def run(self):
        return [map_node()]


def _claims():
    from slr import claims
    return claims.load()


def _status(cl) -> str:
    if not cl:
        return "none"
    return "ok" if all(c.ok for c in cl) else "failing"


def _by_result(all_claims):
    out = defaultdict(list)
    for c in all_claims:
        for r in c.supports:
            out[r].append(c)
    return out


def _uri(app, fromdoc, todoc, anchor=None):
    uri = app.builder.get_relative_uri(fromdoc, todoc)
    return uri + (f"#{anchor}" if anchor else "")


def _fmt(x):
    if isinstance(x, float):
        return f"{x:.4g}"
    if isinstance(x, list):
        return "[" + ", ".join(_fmt(v) for v in x[:6]) + (", ..." if len(x) > 6 else "") + "]"
    if isinstance(x, dict) and "max" in x:
        return f"array {tuple(x['shape'])}, range [{x['min']:.4g}, {x['max']:.4g}]"
    return str(x)


def _table(rows, header):
    table = nodes.table(classes=["claims-table"])
    group = nodes.tgroup(cols=len(header))
    table += group
    for _ in header:
        group += nodes.colspec(colwidth=1)
    head = nodes.thead()
    group += head
    body = nodes.tbody()
    group += body
    for cells, target in ((header, head), *((r, body) for r in rows)):
        row = nodes.row()
        for cell in cells:
            entry = nodes.entry()
            entry += cell if isinstance(cell, nodes.Node) else nodes.paragraph(text=str(cell))
            row += entry
        target += row
    return table


def _claim_rows(app, docname, cl):
    rows = []
    for c in cl:
        chapter = nodes.paragraph()
        chapter += nodes.reference(text=c.chapter, refuri=_uri(app, docname, f"book/{c.chapter}"))
        status = "holds" if c.ok else ("control passes" if c.holds else "FAILS")
        method = c.method + (f". Error rate: {c.error_rate}" if c.error_rate else "")
        rows.append([chapter, f"{c.statement} ({c.id})", method, _fmt(c.value), c.test,
                     f"{c.control_note}: {_fmt(c.control_value)}", status])
    return rows


HEADER = ["chapter", "claim", "method (and error rate)", "measured", "test", "control (must fail)",
          "status"]


def _ledger(app, docname, all_claims):
    out = []
    by = _by_result(all_claims)
    covered = sum(1 for r in paper_map.RESULTS if by.get(r))
    n_ok = sum(c.ok for c in all_claims)
    chapters = defaultdict(int)
    for c in all_claims:
        chapters[c.chapter] += 1
    summary = nodes.paragraph(text=(
        f"{len(all_claims)} claims recorded, {n_ok} hold with a failing control; {covered} of "
        f"{len(paper_map.RESULTS)} numbered results and figures of the paper are checked. Claims per "
        "chapter: " + ", ".join(f"{k} {v}" for k, v in sorted(chapters.items())) + "."))
    out.append(summary)
    for rid, (short, what, doc, label) in paper_map.RESULTS.items():
        sec = nodes.section(ids=[f"claims-{rid}"])
        title = nodes.title()
        title += nodes.Text(f"{short}: {what}")
        sec += title
        para = nodes.paragraph()
        para += nodes.reference(text="statement", refuri=_uri(app, docname, doc, label))
        cl = by.get(rid, [])
        para += nodes.Text(f" · {len(cl)} claim(s) · {WORDS[_status(cl)]}.")
        sec += para
        if cl:
            sec += _table(_claim_rows(app, docname, cl), HEADER)
        out.append(sec)
    own = [c for c in all_claims if not c.supports]
    sec = nodes.section(ids=["claims-book"])
    title = nodes.title()
    title += nodes.Text("The book's own claims")
    sec += title
    sec += nodes.paragraph(text=f"{len(own)} claims that support no numbered result of the paper.")
    if own:
        sec += _table(_claim_rows(app, docname, own), HEADER)
    out.append(sec)
    return out


def _dot(app, docname, all_claims):
    by = _by_result(all_claims)
    lines = ['digraph paper {', 'rankdir=LR; bgcolor="transparent";',
             'node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=11];']
    for rid, (short, what, doc, label) in paper_map.RESULTS.items():
        fill, line = COLOURS[_status(by.get(rid, []))]
        url = _uri(app, docname, doc, label)
        tip = f"{short}: {what} ({len(by.get(rid, []))} claims; {WORDS[_status(by.get(rid, []))]})"
        lines.append(f'"{rid}" [label="{short}", fillcolor="{fill}", color="{line}", '
                     f'URL="{html.escape(url)}", tooltip="{html.escape(tip)}", target="_top"];')
    for a, b in paper_map.USES:
        lines.append(f'"{a}" -> "{b}";')
    lines.append("}")
    return "\n".join(lines)


def _svg(source: str) -> str:
    dot = shutil.which("dot")
    if dot is None:
        raise ExtensionError("the paper map needs Graphviz's `dot` (Debian package graphviz; `make book` "
                             "installs it)")
    svg = subprocess.run([dot, "-Tsvg"], input=source, capture_output=True, text=True, check=True).stdout
    svg = svg[svg.index("<svg"):]
    # fit the page: scale to the column's width (the viewBox keeps the drawing), never wider than drawn
    return re.sub(r'^<svg width="([0-9.]+)pt" height="[0-9.]+pt"',
                  r'<svg width="100%" style="max-width: \1pt; height: auto"', svg, count=1)


def _backlinks(app, doctree, docname, by):
    """Under each statement block of a numbered result, and in the caption of each regenerated figure of
    the paper, a link to its section of the ledger."""
    labels = {label: rid for rid, (_, _, doc, label) in paper_map.RESULTS.items() if label and doc == docname}
    done = set()
    for node in list(doctree.findall(nodes.Element)):
        hit = [labels[i] for i in node.get("ids", []) if i in labels and labels[i] not in done]
        figure = isinstance(node, nodes.figure)
        if not hit or not (figure or type(node).__module__.startswith("sphinx_proof")) \
                or node.tagname == "proof_node":
            continue
        rid = hit[0]
        done.add(rid)
        cl = by.get(rid, [])
        link = nodes.reference(text=f"Checked claims: {len(cl)} ({WORDS[_status(cl)]})",
                               refuri=_uri(app, docname, LEDGER_DOC, f"claims-{rid}"))
        caption = next(iter(node.findall(nodes.caption)), None) if figure else None
        if caption is not None:
            caption += nodes.Text(" ")
            caption += link
        else:
            para = nodes.paragraph(classes=["claims-backlink"])
            para += link
            node += para


def fill(app, doctree, docname):
    all_claims = None
    for node in list(doctree.findall(ledger_node)) + list(doctree.findall(map_node)):
        if all_claims is None:
            all_claims = _claims()
        if isinstance(node, ledger_node):
            node.replace_self(_ledger(app, docname, all_claims))
        elif app.builder.format == "html":
            node.replace_self(nodes.raw("", f'<div class="paper-map">{_svg(_dot(app, docname, all_claims))}</div>',
                                        format="html"))
        else:
            node.replace_self(nodes.paragraph(text="The map of the paper's results is in the HTML book."))
    if docname != LEDGER_DOC and any(doc == docname for _, _, doc, _ in paper_map.RESULTS.values()):
        _backlinks(app, doctree, docname, _by_result(_claims() if all_claims is None else all_claims))


def setup(app):
    paper_map.check()
    app.add_node(ledger_node)
    app.add_node(map_node)
    app.add_directive("claims-ledger", LedgerDirective)
    app.add_directive("paper-map", MapDirective)
    app.connect("doctree-resolved", fill)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
