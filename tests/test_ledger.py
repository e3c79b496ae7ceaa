"""The claims ledger of the built book: every chapter records claims, every claim holds with a failing
control, every result of the paper's map is checked, and the map is drawn with a link per result.

Run by `make test` after the book build (`SLR_BROWSER_TEST=1`), on the claims the chapters recorded
while they executed (slr.claims.claims_dir()) and on the built HTML; skipped otherwise.
"""
import decimal
import html
import os
import re
import sys
from pathlib import Path

import pytest
from booktoc import CLAIMS_PENDING, RESULTS_PENDING, toc_files

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
sys.path.insert(0, str(ROOT / "web"))
import paper_map  # noqa: E402

from slr import claims, figcheck  # noqa: E402

if os.environ.get("SLR_BROWSER_TEST") != "1":
    pytest.skip("runs after the book build (make test sets SLR_BROWSER_TEST=1)", allow_module_level=True)

CHAPTERS = [Path(f).name for f in toc_files() if (ROOT / (f + ".ipynb")).exists()]


@pytest.fixture(scope="module")
def recorded():
    return claims.load()


def test_the_map_is_consistent():
    paper_map.check()
    for rid, (_, _, doc, _) in paper_map.RESULTS.items():
        assert doc in toc_files(), f"{rid} points to {doc}, which is not in the book"


def test_every_label_of_the_map_is_stated_in_its_chapter():
    """A result's label must be a `:label:` (or `(label)=` target) of the chapter the map names, or the
    ledger's link to the statement lands nowhere; the control: a label of another chapter is refused."""
    def labels(doc):
        path = ROOT / (doc + ".ipynb")
        text = path.read_text() if path.exists() else (ROOT / (doc + ".md")).read_text()
        return (set(re.findall(r":label: ([\w.-]+)", text)) | set(re.findall(r"\(([\w.-]+)\)=", text))
                | set(re.findall(r'"name": "([\w.-]+)"', text)))   # a figure's name (cell metadata)
    wrong = [(rid, doc, lab) for rid, (_, _, doc, lab) in paper_map.RESULTS.items()
             if lab is not None and lab not in labels(doc)]
    assert not wrong, f"labels not stated in their chapter: {wrong}"
    assert "thm-1" not in labels("book/pgd") and "thm-1" in labels("book/oracle")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_chapter_records_claims(recorded, chapter):
    if chapter in CLAIMS_PENDING:
        pytest.skip(f"{chapter}: checks not yet migrated to claims (tests/booktoc.py CLAIMS_PENDING)")
    assert any(c.chapter == chapter for c in recorded), f"{chapter} recorded no claim"


def test_every_claim_holds_and_every_control_fails(recorded):
    bad = [c.id for c in recorded if not c.ok]
    assert recorded and not bad, f"claims that fail or whose control passes: {bad}"


def test_claims_name_known_results(recorded):
    unknown = sorted({r for c in recorded for r in c.supports} - set(paper_map.RESULTS))
    assert not unknown, f"claims support results that are not in web/paper_map.py: {unknown}"


def test_every_result_of_the_map_is_checked(recorded):
    covered = {r for c in recorded for r in c.supports}
    missing = [r for r in paper_map.RESULTS if r not in covered and r not in RESULTS_PENDING]
    assert not missing, f"results of the paper with no claim: {missing}"
    done = sorted(RESULTS_PENDING & covered)
    assert not done, f"checked now: remove {done} from RESULTS_PENDING (tests/booktoc.py)"


def test_ledger_page_lists_every_result_and_draws_the_map():
    page = (HTML / "book" / "claims.html").read_text()
    for rid in paper_map.RESULTS:
        assert f'id="claims-{rid}"' in page, f"the ledger has no section for {rid}"
    svg = page[page.index("<svg"):page.index("</svg>")]
    links = re.findall(r'<a xlink:href="([^"]+)"', svg)
    assert len(links) == len(paper_map.RESULTS), "the map must link every node to its statement"
    for href in links:
        target = (HTML / "book" / href.split("#")[0]).resolve()
        assert target.exists(), f"the map links to a missing page: {href}"


def test_ledger_page_states_every_error_rate(recorded):
    """Every error rate a chapter recorded is on the ledger page, in its claim's row (the page's text,
    HTML entities decoded); the control: a recorded rate with " (changed)" appended is not."""
    page = html.unescape(re.sub(r"<[^>]+>", "", (HTML / "book" / "claims.html").read_text()))
    page = re.sub(r"\s+", " ", page)
    rated = [c for c in recorded if c.error_rate]
    assert len(rated) > 100
    for c in rated:
        assert re.sub(r"\s+", " ", f"Error rate: {c.error_rate}") in page, f"{c.id}: no error rate"
    assert re.sub(r"\s+", " ", f"Error rate: {rated[0].error_rate} (changed)") not in page


def test_no_legend_covers_data():
    """Every figure the chapters drew while they executed was measured (slr.figcheck, connected by
    slr.plotting.new_figure): no legend lies over a line, a band, markers, bars or an image. The
    detector's controls (legends deliberately over data) are in tests/test_figcheck.py."""
    recorded = figcheck.load()
    assert sum(len(r) for r in recorded.values()) >= 20, "the chapters recorded almost no figure"
    bad = [(chapter, rec["figure"], leg["axes_title"], leg["covered"]) for chapter, recs in recorded.items()
           for rec in recs if rec for leg in rec["legends"] if leg["covered"]]
    assert not bad, f"legends over data (chapter, figure, panel title, points covered): {bad}"


# --- Bounds quoted in prose: "at most {glue:text}`x:.2f`" must not show 0.48 for 0.4823 ---------------
# The words that make a glued number a bound on the quantity it reports, longest first: an upper bound
# (the value is at most the number shown) or a lower bound. "over" and "under" are left out ("over the
# last quarter, {glue}" is no bound).
_UPPER = ("never exceeds", "no more than", "smaller than", "less than", "at most", "within", "up to",
          "below", r"\leq", r"\le", "<", "≤")
_LOWER = ("no less than", "greater than", "larger than", "more than", "at least", "exceeds", "above",
          r"\geq", r"\ge", ">", "≥")
_BOUND = re.compile(r"(" + "|".join(re.escape(w) for w in sorted(_UPPER + _LOWER, key=len, reverse=True))
                    + r")\s*\$?\s*\{glue:text\}`(\w+):([^`]+)`")
# Glued numbers that are thresholds on a free variable, not the extreme of a measured one ("so
# alpha < {d_alpha_max}": the condition stays sufficient when the number shown is rounded down).
THRESHOLDS = {"d_alpha_max"}


def prose_bound_errors(markdown, glued):
    """The bounds of ``markdown`` that the number shown does not keep: (word, name, value, shown)."""
    errors = []
    for m in _BOUND.finditer(markdown):
        word, name, fmt = m.groups()
        value = glued.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        text = format(value, fmt)
        # compared in decimal, in the unit shown: float("3.6") / 100 is one ulp above 0.036
        exact = decimal.Decimal(repr(float(value))) * (100 if text.endswith("%") else 1)
        shown = decimal.Decimal(text.rstrip("%"))
        upper = (word in _UPPER) != (name in THRESHOLDS)
        if (exact > shown) if upper else (exact < shown):
            errors.append((word, name, value, text))
    return errors


def glued_values(notebook):
    """The values the executed ``notebook`` glued (from the jupyter-cache the build rendered)."""
    import ast

    import nbformat
    from jupyter_cache import get_cache
    cache = get_cache(ROOT / "_build" / ".jupyter_cache")
    record = cache.match_cache_notebook(nbformat.read(notebook, as_version=4))
    out = {}
    for cell in cache.get_cache_bundle(record.pk).nb.cells:
        for o in cell.get("outputs", []):
            name = o.get("metadata", {}).get("scrapbook", {}).get("name")
            text = o.get("data", {}).get("application/papermill.record/text/plain")
            if name and text is not None:
                try:
                    out[name] = ast.literal_eval(text)
                except (SyntaxError, ValueError):
                    out[name] = text
    return out


def test_bounds_quoted_in_prose_hold():
    """Every number quoted as a bound ("at most", "within", "at least", "$\\ge$" ... before a glue
    role) is a true bound as displayed: the chapters glue such values through slr.book.bound."""
    import nbformat
    bad = {}
    for chapter in CHAPTERS:
        path = ROOT / "book" / f"{chapter}.ipynb"
        nb = nbformat.read(path, as_version=4)
        md = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        if errors := prose_bound_errors(md, glued_values(path)):
            bad[chapter] = errors
    assert not bad, f"bounds that the displayed number breaks (word, name, value, shown): {bad}"


def test_prose_bound_check_fails_on_rounded_bounds():
    """The control: bounds rounded to the nearest are caught, the same values through book.bound are
    not (a percentage included: shown values are compared in decimal), and a threshold on a free variable
    is read the other way."""
    from slr import book
    cases = [("distance at most {glue:text}`x:.2f`", 0.4823, ".2f", "at most"),
             ("worse by at least {glue:text}`x:.1f` errors", 6.97, ".1f", "at least"),
             ("is below {glue:text}`x:.0e` for", 3.198e-10, ".0e", "at most"),
             ("$|\\kappa|\\ge$ {glue:text}`x:.4f`", 0.99755, ".4f", "at least"),
             # a percentage: bound(0.0403) = 0.041 is shown 4.1%, and float("4.1") / 100 < 0.041 in binary,
             # so only the decimal comparison passes it
             ("at most {glue:text}`x:.1%`", 0.0403, ".1%", "at most")]
    for text, value, fmt, side in cases:
        assert prose_bound_errors(text, {"x": value}), text
        assert not prose_bound_errors(text, {"x": book.bound(value, fmt, side)}), text
    text = "so $\\alpha <$ {glue:text}`d_alpha_max:.1e`"
    assert prose_bound_errors(text, {"d_alpha_max": 2.06e-3})          # shown 2.1e-03: too large
    assert not prose_bound_errors(text, {"d_alpha_max": book.bound(2.06e-3, ".1e", "at least")})
