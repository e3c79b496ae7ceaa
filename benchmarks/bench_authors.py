"""The paper's Section 5 figures: this book's code against the authors' public code, timed in one run.

    .venv/bin/python benchmarks/bench_authors.py --authors DIR     # `make bench-authors AUTHORS=DIR`

DIR is a clone of https://github.com/PierreMarion23/single-location-regression (the runs below used
commit e64b755 of its Section 5 code); nothing of it is shipped with this book. Their code runs in its
own environment, `_build/authors-venv`, created on first use with their pins (jax and jaxlib 0.4.31,
quadax 0.2.2, pandas 2.2.2, numpy < 2) from the package registry.

1. Theirs: `authors_steps.py` measures the cost of one step of their `run.run` (their loop, their
   jitted step, their logging; compilation excluded) and extrapolates it to their full figures
   (30 repeats of 20 000 to 200 000 steps), a lower bound on their time.
2. Ours: `bench_figures.py` runs the five figures at full scale with the result cache off and an empty
   JAX compilation cache, so compilation is included.

Prints both, the ratios, and the four exact-gradient figures (4(a), 4(b), 7(a), 7(b)) together.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PINS = ["jax==0.4.31", "jaxlib==0.4.31", "quadax==0.2.2", "pandas==2.2.2", "numpy<2", "equinox"]
EXACT = ("fig4a", "fig4b", "fig7a", "fig7b")


def authors_python(venv: Path) -> Path:
    """Their environment (created once): Python 3.11 with their pinned packages."""
    py = venv / "bin" / "python"
    if not (venv / ".installed").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([py, "-m", "pip", "install", "-q", *PINS], check=True)
        (venv / ".installed").touch()
    return py


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--authors", required=True, help="a clone of the authors' repository")
    p.add_argument("--venv", default=str(ROOT / "_build" / "authors-venv"))
    args = p.parse_args(argv)
    if not (Path(args.authors) / "run.py").exists() or not (Path(args.authors) / "dynamics.py").exists():
        raise ValueError(f"authors must be a clone of the authors' repository (run.py, dynamics.py), "
                         f"got {args.authors!r}")
    py = authors_python(Path(args.venv))
    theirs = json.loads(subprocess.run([py, HERE / "authors_steps.py", "--authors", args.authors],
                                       check=True, stdout=subprocess.PIPE, text=True).stdout)
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": str(Path(tmp) / "jax-cache"), "SLR_CACHE": "0"}
        out = Path(tmp) / "ours.json"
        subprocess.run([sys.executable, HERE / "bench_figures.py", "--json", out], check=True, env=env)
        ours = json.loads(out.read_text())
    print(f"\n{'figure':8s} {'authors (s, extrapolated)':>26s} {'their step (us)':>16s} {'ours (s, cold)':>15s}"
          f" {'ratio':>7s}")
    for fig in (*EXACT, "fig5"):
        t = theirs[fig]
        print(f"{fig:8s} {t['extrapolated_s']:26.1f} {t['step_s'] * 1e6:16.1f} {ours[fig]:15.2f} "
              f"{t['extrapolated_s'] / ours[fig]:7.0f}x")
    a, b = sum(theirs[f]["extrapolated_s"] for f in EXACT), sum(ours[f] for f in EXACT)
    print(f"{'4 exact':8s} {a:26.1f} {'':16s} {b:15.2f} {a / b:7.0f}x")
    print(f"load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
