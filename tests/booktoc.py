"""The book's table of contents, read from _toc.yml (shared by the tests that walk the book)."""
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def toc_files():
    """Every file of _toc.yml (without extension), root first, in reading order."""
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


def toc_notebooks():
    """The chapters of _toc.yml that are notebooks, as paths, in reading order."""
    return [ROOT / (f + ".ipynb") for f in toc_files() if (ROOT / (f + ".ipynb")).exists()]


# Chapters whose checks are not yet claims (slr.claims): none since issues 15 and 16. The set may only
# shrink; a chapter leaves it when its last bare assert becomes a checked claim.
CLAIMS_PENDING: set[str] = set()
# Results of the paper's map that no claim checks yet: the figures of the pending chapter.
RESULTS_PENDING: set[str] = set()
