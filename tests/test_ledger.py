"""The claims ledger of the built book: every chapter records claims, every claim holds with a failing
control, every result of the paper's map is checked, and the map is drawn with a link per result.

Run by `make test` after the book build (`SLR_BROWSER_TEST=1`), on the claims the chapters recorded
while they executed (slr.claims.claims_dir()) and on the built HTML; skipped otherwise.
"""
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


def test_no_legend_covers_data():
    """Every figure the chapters drew while they executed was measured (slr.figcheck, connected by
    slr.plotting.new_figure): no legend lies over a line, a band, markers, bars or an image. The
    detector's controls (legends deliberately over data) are in tests/test_figcheck.py."""
    recorded = figcheck.load()
    assert sum(len(r) for r in recorded.values()) >= 20, "the chapters recorded almost no figure"
    bad = [(chapter, rec["figure"], leg["axes_title"], leg["covered"]) for chapter, recs in recorded.items()
           for rec in recs if rec for leg in rec["legends"] if leg["covered"]]
    assert not bad, f"legends over data (chapter, figure, panel title, points covered): {bad}"
