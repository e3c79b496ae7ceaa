"""The book's claims under other seeds: execute chapters with every named experiment on other random
streams and list the claims that no longer hold.

Usage: .venv/bin/python benchmarks/audit_seeds.py [--offset N] [--keys] [chapter ...]

Each chapter runs with ``SLR_SEED=N`` (default 1000: :func:`slr.experiments.seed_offset` adds it to the
seed of every ``experiments.run``), ``SLR_CLAIMS_AUDIT=1`` (claims are recorded, never raised, so a
chapter runs to its end) and a fresh, empty result cache. Chapters whose randomness does not go through
``experiments.run`` draw the same numbers as without the offset; the default list is the chapters whose
code calls it (:func:`uses_experiments`). Prints, per chapter, the claims recorded and those that fail (the claim does not hold, or its
control passes), with their values, and the cells that raise (a chapter whose code assumes what one
stream showed); exit status 1 if any fails or raises. A claim that fails here is not false:
it is a claim whose check depends on the stream, which the chapter must say or change.

``--keys`` re-rolls every chapter, not only those of ``experiments.run``: a first cell, added to the
notebook in memory (the file is not changed), makes ``jax.random.key`` and ``jax.random.PRNGKey`` add N
to every integer seed in that kernel (the chapter's literal keys and those made inside ``slr`` alike;
an experiment's seed is then offset twice, still another stream). The default list is then every
chapter.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "web"))
import kernel_wakeup  # noqa: E402  (a client that cannot sleep through a reply: its docstring)

kernel_wakeup.install()


def uses_experiments():
    """The chapters (book/*.ipynb, in name order) whose code calls ``experiments.run``: those the offset
    re-rolls."""
    return [p.stem for p in sorted((ROOT / "book").glob("*.ipynb"))
            if any("experiments.run" in "".join(c.source) for c in nbformat.read(p, as_version=4).cells
                   if c.cell_type == "code")]


# The first cell of a chapter under --keys: every key made from an integer seed is made from seed + N.
SHIFT_KEYS = """import os as _os, jax as _jax
_off = int(_os.environ["SLR_SEED"])
def _shift(make):
    def made(seed, *args, **kwargs):
        return make(seed + _off, *args, **kwargs)
    return made
_jax.random.key, _jax.random.PRNGKey = _shift(_jax.random.key), _shift(_jax.random.PRNGKey)
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--offset", type=int, default=1000, help="SLR_SEED: added to every experiment's seed")
    ap.add_argument("--keys", action="store_true", help="offset every jax.random.key in every chapter")
    ap.add_argument("chapters", nargs="*")
    args = ap.parse_args()
    if args.offset < 1:
        raise ValueError(f"--offset must be an integer >= 1, got {args.offset}")
    work = Path(tempfile.gettempdir()) / f"slr-audit-seeds-{args.offset}"
    shutil.rmtree(work, ignore_errors=True)
    os.environ.update(SLR_SEED=str(args.offset), SLR_CLAIMS_AUDIT="1", SLR_CACHE_DIR=str(work / "cache"),
                      SLR_CLAIMS_DIR=str(work / "claims"))
    failed = 0
    every = [p.stem for p in sorted((ROOT / "book").glob("*.ipynb"))]
    for name in args.chapters or (every if args.keys else uses_experiments()):
        path = ROOT / "book" / f"{name}.ipynb"
        if not path.exists():
            raise ValueError(f"chapter must be a notebook of book/, got {name!r}")
        nb = nbformat.read(path, as_version=4)
        if args.keys:
            nb.cells.insert(0, nbformat.v4.new_code_cell(SHIFT_KEYS))
        NotebookClient(nb, timeout=1800, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        first = 1 if args.keys else 0   # the inserted cell: report the notebook's own cell numbers
        errors = [(i - first, o["ename"], o["evalue"]) for i, c in enumerate(nb.cells) if c.cell_type == "code"
                  for o in c.get("outputs", []) if o.get("output_type") == "error"]
        records = json.loads((work / "claims" / f"{name}.json").read_text())
        bad = [r for r in records if not (r["holds"] and r["control_fails"])]
        failed += len(bad) + len(errors)
        mode = f"SLR_SEED={args.offset}" + (f" and every key + {args.offset} (--keys)" if args.keys else "")
        print(f"{name}: {len(records)} claims, {len(bad)} fail under {mode}; "
              f"{len(errors)} cells raise", flush=True)
        for i, ename, evalue in errors[:3]:  # the first ones: the later ones often follow from them
            print(f"  - cell {i} raises {ename}: {evalue[:150]}", flush=True)
        for r in bad:
            why = "does not hold" if not r["holds"] else "its control passes"
            short = lambda x: repr(x) if len(repr(x)) < 100 else repr(x)[:97] + "..."
            print(f"  - {r['id']} ({why}): {r['test']}, value {short(r['value'])}, "
                  f"control {short(r['control_value'])}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
