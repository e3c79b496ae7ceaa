"""Execute every chapter of the book cold (empty slr cache) and print a table of times.

Usage: .venv/bin/python benchmarks/time_chapters.py [--warm] [chapter ...]

Cold: each chapter runs with a fresh, empty SLR_CACHE_DIR, as on a fresh clone. --warm reuses the
cache of the previous cold run of this script (the second execution in one CI run: the book build
after nbval). Chapters are read from _toc.yml in reading order.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import yaml
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "web"))
import kernel_wakeup  # noqa: E402  (a client that cannot sleep through a reply: its docstring)

kernel_wakeup.install()


def toc_notebooks():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    out = []

    def walk(node):
        if isinstance(node, dict):
            if "file" in node and (ROOT / (node["file"] + ".ipynb")).exists():
                out.append(ROOT / (node["file"] + ".ipynb"))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(toc)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--warm", action="store_true", help="reuse the result cache of the last cold run")
    ap.add_argument("chapters", nargs="*")
    args = ap.parse_args()
    cache = Path(tempfile.gettempdir()) / "slr-time-chapters-cache"
    if not args.warm:
        import shutil
        shutil.rmtree(cache, ignore_errors=True)
    os.environ["SLR_CACHE_DIR"] = str(cache)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # the kernels keep their bytecode, as under the Makefile
    nbs = toc_notebooks()
    if args.chapters:
        nbs = [p for p in nbs if p.stem in args.chapters]
    rows, total = [], 0.0
    for path in nbs:
        nb = nbformat.read(path, as_version=4)
        t0 = time.perf_counter()
        NotebookClient(nb, timeout=1800, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        dt = time.perf_counter() - t0
        total += dt
        rows.append((path.stem, dt))
        print(f"{path.stem:32s} {dt:8.1f} s", flush=True)
    print()
    print(f"| chapter | {'warm' if args.warm else 'cold'} time (s) |")
    print("|---|---|")
    for name, dt in rows:
        print(f"| {name} | {dt:.1f} |")
    print(f"| **total** | **{total:.1f}** |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
