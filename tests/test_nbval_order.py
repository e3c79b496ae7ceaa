"""The Makefile's nbval step runs every chapter once, the costliest first: the order pytest collects them in
is the order the two workers take them, and a long chapter started last leaves one core idle to the end
(the Transformer chapter, about 290 s, once ran last: nbval took 624 s)."""
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _collected(args):
    """The notebooks in the order pytest collects them from ``args``."""
    run = subprocess.run([sys.executable, "-m", "pytest", "--nbval-lax", *args, "-q", "--collect-only",
                          "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stdout + run.stderr
    order = []
    for line in run.stdout.splitlines():
        name = line.split("::")[0]
        if name.endswith(".ipynb") and name not in order:
            order.append(name)
    return order


def _makefile_chapters():
    run = subprocess.run(["make", "-n", "--no-print-directory", "notebooks"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    line = next(x for x in run.stdout.splitlines() if "--nbval-lax" in x)
    return re.findall(r"book/[\w-]+\.ipynb", line)


def test_every_chapter_once_the_costliest_first():
    order = _collected(_makefile_chapters())
    assert sorted(order) == sorted(str(p.relative_to(ROOT)) for p in (ROOT / "book").glob("*.ipynb"))
    assert order[:3] == ["book/transformer.ipynb", "book/pgd.ipynb", "book/beyond_open_questions.ipynb"]
    # control: the arguments before the fix (the costliest named, then the directory) are collected in
    # alphabetical order, the Transformer chapter last
    old = _collected(["book/transformer.ipynb", "book/pgd.ipynb", "book"])
    assert old[-1] == "book/transformer.ipynb" and old[0] != "book/transformer.ipynb"


def test_every_test_file_has_a_place_in_the_unit_suite_order():
    """tests/conftest.py sends the unit suite's files to the workers costliest first; a file in neither of its
    lists runs last, which is harmless only for a cheap file (test_coordinates.py, the costliest, once ran last
    because it was missing). Control: a file not in the lists is reported."""
    from tests import conftest
    listed = set(conftest.COSTLIEST_FIRST) | set(conftest.CHEAP_LAST)
    missing = lambda names: sorted(set(names) - listed)
    names = [p.name for p in (ROOT / "tests").glob("test_*.py")]
    assert "test_coordinates.py" in names and missing(names) == []
    assert missing(["test_a_new_file.py"]) == ["test_a_new_file.py"]
    assert len(listed) == len(conftest.COSTLIEST_FIRST) + len(conftest.CHEAP_LAST)  # none in both
