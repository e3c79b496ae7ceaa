"""Every chapter starts with the setup cell of CONTRIBUTING.md, so it runs on Colab and Binder as-is.

The cell is read from CONTRIBUTING.md (the single source of truth), and must be the first code cell of
every book/*.ipynb, verbatim, tagged `remove-cell`, and install from the repository the book's launch
buttons point at (`repository.url` in _config.yml).
"""
import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "book").rglob("*.ipynb"))


def setup_cell():
    text = (ROOT / "CONTRIBUTING.md").read_text()
    m = re.search(r"\*\*First code cell\*\*.*?```python\n(.*?)\n\s*```", text, re.S)
    assert m, "CONTRIBUTING.md lost its setup cell (the ```python block after **First code cell**)"
    lines = m.group(1).split("\n")
    indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    return "\n".join(line[indent:] for line in lines).strip()


def test_setup_cell_installs_from_the_books_repository():
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    cell = setup_cell()   # installs slr with what the chapters import (the pyproject extra `book`)
    assert f'url = "{url}"' in cell and 'f"slr[book] @ git+{url}"' in cell
    import tomllib
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {"myst-nb", "ipywidgets", "scikit-learn"} <= {re.split(r"[<>=\[ ]", r)[0] for r in extras["book"]}


def test_launch_buttons_for_binder_and_colab():
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert cfg["launch_buttons"]["binderhub_url"].startswith("https://mybinder.org")
    assert cfg["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    assert not cfg["launch_buttons"].get("thebe"), "thebe loads from a CDN"
    # Binder builds the environment from requirements.txt and installs slr in postBuild
    assert (ROOT / "requirements.txt").exists()
    assert re.search(r"pip install .*\.", (ROOT / "postBuild").read_text())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_first_code_cell_is_the_setup_cell(path):
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code, f"{path.name} has no code cell"
    first = code[0]
    src = "".join(first["source"]) if isinstance(first["source"], list) else first["source"]
    assert src.strip() == setup_cell(), (
        f"{path.name}: the first code cell must be the setup cell of CONTRIBUTING.md, verbatim")
    tags = first.get("metadata", {}).get("tags", [])
    assert "remove-cell" in tags, f"{path.name}: the setup cell must be tagged remove-cell"
