"""web/reading_time.py: reading times and exercise counts computed from a page's source."""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "web"))
import reading_time as rt  # noqa: E402


def _nb(path, words, code_lines, hidden_lines, n_exercises):
    cells = [{"cell_type": "markdown", "metadata": {}, "source": " ".join(["word"] * words)}]
    cells += [{"cell_type": "markdown", "metadata": {},
               "source": "```{exercise-start}\n:label: x\n```\nDo it.\n```{exercise-end}\n```"}] * n_exercises
    cells.append({"cell_type": "code", "metadata": {}, "source": "x = 1\n" * code_lines, "outputs": []})
    cells.append({"cell_type": "code", "metadata": {"tags": ["remove-cell"]},
                  "source": "y = 2\n" * hidden_lines, "outputs": []})
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def test_minutes_count_prose_and_visible_code(tmp_path):
    # 3000 words at 150 a minute = 20 min; 150 visible lines at 4 s = 10 min: 30 min
    assert rt.minutes(_nb(tmp_path / "a.ipynb", 3000, 150, 0, 0)) == 30
    # control: hidden code does not count, one more word rounds up to the next 5 minutes
    assert rt.minutes(_nb(tmp_path / "b.ipynb", 3000, 150, 900, 0)) == 30
    assert rt.minutes(_nb(tmp_path / "c.ipynb", 3001, 150, 0, 0)) == 35
    assert rt.minutes(_nb(tmp_path / "d.ipynb", 10, 0, 0, 0)) == 5


def test_exercises_are_counted(tmp_path):
    assert rt.exercises(_nb(tmp_path / "a.ipynb", 10, 1, 0, 3)) == 3
    assert rt.exercises(_nb(tmp_path / "b.ipynb", 10, 1, 0, 0)) == 0
    assert rt.exercises(ROOT / "book" / "task.ipynb") >= 3   # every chapter sets 3+ exercises
