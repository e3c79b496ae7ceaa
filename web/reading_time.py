"""Sphinx extension: the role ``{reading-time}`book/task``` renders an estimated reading time of a page
(``{reading-time}`book/task book/oracle``` the total of several pages); ``{exercise-count}`` counts the
exercises of pages and ``{study-time}`` adds MINUTES_PER_EXERCISE for each to the reading time.

The estimate is computed from the page's source when the book is built, never typed: the words of its
prose (markdown cells, or the whole file for a ``.md`` page) at ``WORDS_PER_MINUTE``, plus the lines of
code a reader sees (code cells not tagged ``remove-cell`` or ``remove-input``) at ``SECONDS_PER_CODE_LINE``,
rounded up to the next 5 minutes. Mathematics counts as words, which is generous for a text that derives.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

from docutils import nodes

WORDS_PER_MINUTE = 150      # technical prose with mathematics
SECONDS_PER_CODE_LINE = 4   # reading a line of a visible code cell
MINUTES_PER_EXERCISE = 30  # the syllabus's allowance for one exercise (study-time role)
HIDDEN = {"remove-cell", "remove-input"}


def minutes(path: Path) -> int:
    """Estimated reading time of a chapter (``.ipynb``) or page (``.md``), in minutes (a multiple of 5)."""
    words, code_lines = 0, 0
    if path.suffix == ".ipynb":
        for cell in json.loads(path.read_text())["cells"]:
            src = "".join(cell["source"])
            if cell["cell_type"] == "markdown":
                words += len(re.findall(r"\S+", src))
            elif cell["cell_type"] == "code" and not HIDDEN & set(cell.get("metadata", {}).get("tags", [])):
                code_lines += sum(1 for line in src.splitlines() if line.strip())
    else:
        words = len(re.findall(r"\S+", path.read_text()))
    total = words / WORDS_PER_MINUTE + code_lines * SECONDS_PER_CODE_LINE / 60
    return max(5, 5 * math.ceil(total / 5))


def _source(srcdir: Path, docname: str) -> Path:
    for suffix in (".ipynb", ".md"):
        if (srcdir / (docname + suffix)).exists():
            return srcdir / (docname + suffix)
    raise ValueError(f"reading-time: no page {docname!r} (.ipynb or .md) under {srcdir}")


def reading_time_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    total = sum(minutes(path) for path in _pages(inliner, text))
    return [nodes.inline(rawtext, _duration(total), classes=["reading-time"])], []


def exercises(path: Path) -> int:
    """How many exercises (sphinx-exercise ``exercise-start`` blocks) a chapter sets."""
    if path.suffix != ".ipynb":
        return len(re.findall(r"\{exercise-start\}", path.read_text()))
    cells = json.loads(path.read_text())["cells"]
    return sum(len(re.findall(r"\{exercise-start\}", "".join(c["source"])))
               for c in cells if c["cell_type"] == "markdown")


def _pages(inliner, text):
    env = inliner.document.settings.env
    paths = [_source(Path(env.srcdir), doc) for doc in text.split()]
    for path in paths:
        env.note_dependency(str(path))
    return paths


def _duration(total: int) -> str:
    return f"{total} min" if total < 60 else f"{total // 60} h {total % 60:02d} min"


def exercise_count_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    n = sum(exercises(p) for p in _pages(inliner, text))
    return [nodes.inline(rawtext, f"{n} exercise{'s' if n != 1 else ''}", classes=["exercise-count"])], []


def study_time_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """Reading time plus MINUTES_PER_EXERCISE for each exercise of the pages."""
    total = sum(minutes(p) + MINUTES_PER_EXERCISE * exercises(p) for p in _pages(inliner, text))
    return [nodes.inline(rawtext, _duration(total), classes=["study-time"])], []


def setup(app):
    app.add_role("reading-time", reading_time_role)
    app.add_role("exercise-count", exercise_count_role)
    app.add_role("study-time", study_time_role)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
