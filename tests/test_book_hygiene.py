"""The book's source stays clean: notebooks without outputs, every chapter in the table of contents."""
import json
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "book").rglob("*.ipynb"))


def _toc_files():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                files.append(node["file"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(toc.get("parts", []))
    walk(toc.get("chapters", []))
    return files


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
