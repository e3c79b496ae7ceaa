"""Time the paper's Section 5 figures at full scale (30 repeats, all steps, compile included).

    .venv/bin/python benchmarks/bench_figures.py             # all five figures
    .venv/bin/python benchmarks/bench_figures.py --only fig5 # one (repeatable: --only fig4a --only fig7b)

(`benchmarks/bench_authors.py` runs it with an empty compilation cache beside the authors' own code.)

The cache is bypassed (every figure is computed). Prints, per figure, the wall time (and the CPU time
of the process, user + system, all threads: a check on a machine shared with other jobs) and the final
median [2.5%, 97.5%] over repeats of |kappa|, |nu|, the excess risk and the distance to M, and checks
the expectations the paper states for Figures 4(a), 4(b) and 5 (Section 5).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ["SLR_CACHE"] = "0"

import numpy as np  # noqa: E402

from slr import experiments as E  # noqa: E402


SECTION_5 = ("fig4a", "fig4b", "fig5", "fig7a", "fig7b")  # the dynamics figures of Section 5


def _q(x):
    x = np.asarray(x)
    return f"{np.median(x):.4g} [{np.percentile(x, 2.5):.3g}, {np.percentile(x, 97.5):.3g}]"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", action="append", choices=SECTION_5, help="figure(s) to run")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="also write {figure: seconds} to this file")
    args = p.parse_args(argv)
    names = args.only or list(SECTION_5)
    rows, checks = [], []
    for name in names:
        t0, c0 = time.perf_counter(), time.process_time()
        tr = E.run(name, seed=args.seed)
        np.asarray(tr.kappa)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        dist = np.asarray(tr.dist_manifold)
        fin = lambda a: np.asarray(a)[:, -1]
        closed = "-" if tr.excess_risk_closed is None else _q(fin(tr.excess_risk_closed))
        rows.append((name, dt, cpu, _q(np.abs(fin(tr.kappa))), _q(np.abs(fin(tr.nu))),
                     _q(fin(tr.excess_risk)), closed, _q(dist[:, -1])))
        if name == "fig4a":
            checks.append((name, "median |kappa|, |nu| > 0.999 and dist to M < 1e-6 at the end",
                           np.median(np.abs(fin(tr.kappa))) > 0.999 and np.median(np.abs(fin(tr.nu))) > 0.999
                           and np.median(dist[:, -1]) < 1e-6))
        if name == "fig4b":
            checks.append((name, "dist to M < 1e-12 throughout", float(dist.max()) < 1e-12))
        if name == "fig5":
            e = np.asarray(tr.excess_risk)
            checks.append((name, "final median excess risk 10x below the start",
                           np.median(e[:, -1]) * 10 <= np.median(e[:, 0])))
    w = max(len(r[3]) for r in rows)
    print(f"{'figure':7s} {'time (s)':>9s} {'cpu (s)':>8s}  {'|kappa|':{w}s}  {'|nu|':{w}s}  "
          f"{'excess risk':{w}s}  {'closed form':{w}s}  dist to M")
    for r in rows:
        print(f"{r[0]:7s} {r[1]:9.2f} {r[2]:8.2f}  {r[3]:{w}s}  {r[4]:{w}s}  {r[5]:{w}s}  {r[6]:{w}s}  {r[7]}")
    print("(final values: median [2.5%, 97.5%] over repeats; excess risk: test-batch estimate for fig5, "
          "closed form: Proposition 15, '-' where the excess risk already is the closed form)")
    print(f"load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({r[0]: r[1] for r in rows}, f)
    ok = True
    for name, what, passed in checks:
        print(f"check {name}: {what}: {'OK' if passed else 'FAILED'}")
        ok &= bool(passed)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
