"""The book's source stays clean: notebooks without outputs, every chapter in the table of contents."""
import json
import re
from pathlib import Path

import pytest
import yaml
from booktoc import CLAIMS_PENDING, toc_files

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "book").rglob("*.ipynb"))


def _toc_files():
    return toc_files()


def test_there_are_notebooks():
    assert NOTEBOOKS, "no chapter notebooks found in book/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_committed_without_outputs(path):
    nb = json.loads(path.read_text())
    dirty = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
             and (c.get("outputs") or c.get("execution_count") is not None)]
    assert not dirty, f"{path.name}: cells {dirty} hold outputs; clear them before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_is_in_the_toc(path):
    rel = str(path.relative_to(ROOT).with_suffix(""))
    assert rel in _toc_files(), f"{rel} is not listed in _toc.yml"


def test_every_toc_entry_exists():
    for f in _toc_files():
        assert any((ROOT / (f + ext)).exists() for ext in (".md", ".ipynb")), f"_toc.yml lists missing {f}"


_PRF_OPEN = re.compile(r"^(`{3,}|:{3,})\{prf:(\w+)\}[ \t]*(.*)$")


def _markdown_sources():
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "markdown":
                yield path.name, "".join(cell["source"])
    for path in sorted((ROOT / "book").rglob("*.md")):
        yield path.name, path.read_text()


def test_results_carry_the_papers_numbering():
    """Every prf block but proofs is unnumbered by sphinx-proof (CONTRIBUTING: numbering of results)."""
    bad = []
    for name, text in _markdown_sources():
        lines = text.split("\n")
        for i, line in enumerate(lines):
            m = _PRF_OPEN.match(line)
            if not m or m.group(2) == "proof":
                continue
            opts = []
            for nxt in lines[i + 1:]:
                if not nxt.startswith(":") or nxt.startswith(":::"):
                    break
                opts.append(nxt.strip())
            if ":nonumber:" not in opts:
                bad.append(f"{name}: {line.strip()}")
    assert not bad, "prf blocks without :nonumber: (sphinx-proof's numbers would clash with the paper's):\n" + "\n".join(bad)



@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_checks_are_claims_not_bare_asserts(path):
    """Every check of a chapter is a claim with a negative control (slr.claims.check), recorded for the
    ledger; a bare `assert` in a chapter is refused."""
    code = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    bare = sum(len(re.findall(r"^\s*assert\b", src, re.M)) for src in code)
    checks = sum(src.count("claims.check(") for src in code)
    if path.stem in CLAIMS_PENDING:
        assert checks == 0 or bare > 0, f"{path.stem} has no bare assert left: remove it from CLAIMS_PENDING"
        pytest.skip(f"{path.stem}: checks not yet migrated to claims ({bare} bare asserts)")
    assert bare == 0, f"{path.name}: {bare} bare assert(s); make each a claims.check with a control"
    assert checks > 0, f"{path.name}: the chapter checks no claim"
    assert any('claims.start("' + path.stem + '")' in src for src in code), \
        f"{path.name}: claims.start({path.stem!r}) is missing"


def _code_sources():
    """(where, source) of every chapter code cell and every slr module."""
    for path in NOTEBOOKS:
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            if cell["cell_type"] == "code":
                yield f"{path.name} cell {i}", "".join(cell["source"])
    for path in sorted((ROOT / "slr").glob("*.py")):
        yield path.name, path.read_text()


def _small_fonts(src, min_pt):
    """Explicit font sizes below min_pt points, or named sizes below `small`, in a source."""
    found = [m.group(0) for m in re.finditer(r"(?:fontsize|labelsize|size)\s*=\s*(\d+(?:\.\d+)?)\b", src)
             if "fontsize" in m.group(0) or "labelsize" in m.group(0)
             if float(m.group(1)) < min_pt]
    found += re.findall(r"(?:fontsize|labelsize)\s*=\s*[\"'](?:xx?-small)[\"']", src)
    return found


def test_no_figure_text_below_the_house_minimum():
    """No chapter or module draws text below slr.plotting.MIN_FONT_PT (the figures' labels must read as
    the body's small print); the control shows the scan finds one."""
    from slr import plotting
    assert _small_fonts('ax.legend(fontsize=7); ax.tick_params(labelsize="x-small")', 8) == [
        "fontsize=7", 'labelsize="x-small"']
    bad = [(where, f) for where, src in _code_sources() for f in _small_fonts(src, plotting.MIN_FONT_PT)]
    assert not bad, f"text below {plotting.MIN_FONT_PT} pt: {bad}"


_GATES = re.compile(r"^`{3,}\{(exercise|solution)-(start|end)\}", re.M)
PAGES = NOTEBOOKS + sorted((ROOT / "book").rglob("*.md"))


def _gate_errors(text):
    """What is unbalanced in a page's gated directives (sphinx-exercise): each exercise-start or
    solution-start must be closed by its own end before the next start."""
    errors, open_ = [], None
    for m in _GATES.finditer(text):
        kind, edge = m.groups()
        if edge == "start":
            if open_:
                errors.append(f"{open_}-start not closed before a {kind}-start")
            open_ = kind
        else:
            if open_ != kind:
                errors.append(f"{kind}-end without its start")
            open_ = None
    return errors + ([f"{open_}-start without its end"] if open_ else [])


def test_gate_check_can_fail():
    """Control: a solution left open (the build's 'solution-start without a solution-end') is found."""
    ok = ("```{exercise-start}\n```\nQ\n```{exercise-end}\n```\n"
          "```{solution-start} ex\n```\nA\n```{solution-end}\n```")
    assert _gate_errors(ok) == []
    assert _gate_errors(ok.rsplit("```{solution-end}", 1)[0]) == ["solution-start without its end"]
    assert _gate_errors("````{solution-end}\n````") == ["solution-end without its start"]


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_exercises_and_solutions_are_closed(path):
    """Every exercise and solution of a page is closed before the next opens (the book build fails
    otherwise, after nbval has executed every chapter: this finds it in a second)."""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text())["cells"]
        text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    else:
        text = path.read_text()
    assert _gate_errors(text) == [], f"{path.name}: {_gate_errors(text)}"


MAX_SHOWN_LINES = 15   # issue 12: a cell a reader sees does one thing; plumbing goes to hidden cells
_HIDDEN = {"remove-cell", "remove-input"}


def _long_shown_cells(cells, limit=MAX_SHOWN_LINES):
    """(index, lines) of the code cells a reader sees (not tagged remove-cell or remove-input) with
    more than ``limit`` lines, trailing newlines not counted."""
    out = []
    for i, c in enumerate(cells):
        if c["cell_type"] != "code" or _HIDDEN & set(c.get("metadata", {}).get("tags", [])):
            continue
        n = len("".join(c["source"]).rstrip("\n").split("\n"))
        if n > limit:
            out.append((i, n))
    return out


def test_long_cell_check_can_fail():
    """Control: a shown cell of 16 lines is found, folded (hide-input) or not; the same cell
    removed (remove-cell, remove-input), or of 15 lines, is not."""
    cell = lambda n, tags=(): {"cell_type": "code", "metadata": {"tags": list(tags)},
                               "source": [f"x{i} = {i}\n" for i in range(n)]}
    assert _long_shown_cells([cell(15), cell(16)]) == [(1, 16)]
    assert _long_shown_cells([cell(16, ["remove-cell"]), cell(16, ["remove-input"])]) == []
    assert _long_shown_cells([cell(16, ["hide-input"])]) == [(0, 16)]   # folded, still shown


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_shown_cells_are_short(path):
    """Every code cell a reader sees has at most MAX_SHOWN_LINES lines."""
    long_ = _long_shown_cells(json.loads(path.read_text())["cells"])
    assert not long_, f"{path.name}: shown cells (index, lines) over {MAX_SHOWN_LINES}: {long_}"
