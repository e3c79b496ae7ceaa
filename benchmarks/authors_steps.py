"""The per-step cost of the authors' own code for the paper's Section 5 figures (run by bench_authors.py).

Runs in the authors' environment (their requirements: jax 0.4.31, quadax 0.2.2) with their repository
on ``sys.path`` (``--authors DIR``, a clone of PierreMarion23/single-location-regression; nothing of it is
shipped with this book). For each figure it calls their ``run.run(config, key)`` unchanged, on their own
``config.py`` entry with fewer steps and repeats:

1. one short call compiles their jitted step (not counted);
2. ``run`` with 1 repeat and with ``1 + extra`` repeats of ``n`` steps (``extra`` doubled until the
   difference takes ``--min-seconds``; each time the least of ``--trials`` calls): the difference,
   divided by ``extra * n``, is the marginal cost of one step of one repeat, their Python loop and
   logging included; what a 1-repeat run costs beyond its steps is, with the lambda schedule, their
   precomputation of zeta at each logged step, measured per logged step;
3. their full figure is extrapolated as ``n_repeats * n_steps * (cost of a step)`` plus, with the
   schedule, ``n_steps / log_every`` times the zeta precomputation. Their compilation is left out: the
   extrapolation is a lower bound on their time.

Prints one JSON object: figure -> {"step_s", "zeta_s", "n_steps", "n_repeats", "extrapolated_s"}.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time

# Figure of the paper -> the entry of the authors' config.py that produces it.
FIGURES = {"fig4a": "config_gd_sphere_schedule", "fig4b": "config_gd_manifold",
           "fig7a": "config_gd_sphere_no_schedule_large_lambda",
           "fig7b": "config_gd_sphere_no_schedule_small_lambda", "fig5": "config_sgd_sphere_schedule"}


def _timed(run, config, key, trials=1, **changes):
    """The least wall time of ``trials`` calls of their run (the least is the least disturbed)."""
    cfg, best = {**config, **changes}, float("inf")
    for _ in range(trials):
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):  # their run prints a line per repeat
            run(cfg, key)
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--authors", required=True, help="a clone of the authors' repository")
    p.add_argument("--logs", type=int, default=10, help="logging intervals timed per repeat")
    p.add_argument("--extra", type=int, default=2, help="extra repeats timed")
    p.add_argument("--trials", type=int, default=3, help="calls per timing (the least is kept)")
    p.add_argument("--min-seconds", type=float, default=2.0, help="least time of the extra repeats")
    args = p.parse_args(argv)
    sys.path.insert(0, os.path.abspath(args.authors))
    import jax
    import config as their_config
    from run import run

    os.chdir(tempfile.mkdtemp())  # their run writes pickles/ in the working directory
    key = jax.random.PRNGKey(0)
    out = {}
    for fig, name in FIGURES.items():
        cfg = getattr(their_config, name)
        _timed(run, cfg, key, n_steps=2 * cfg["log_every"], n_repeats=1)  # compilation
        n, extra = args.logs * cfg["log_every"], args.extra
        one = _timed(run, cfg, key, args.trials, n_steps=n, n_repeats=1)
        while True:  # enough extra repeats that their cost dwarfs the timer's noise
            more = _timed(run, cfg, key, args.trials, n_steps=n, n_repeats=1 + extra)
            if more - one >= args.min_seconds or extra >= 64:
                break
            extra *= 2
        step = max(more - one, 0.0) / (extra * n)
        # What one run costs besides its steps: with the lambda schedule, their precomputation of zeta
        # at every logged step (once per figure, not per repeat), extrapolated per logged step.
        once = max(one - step * n, 0.0) / (n // cfg["log_every"])
        once = once if cfg.get("lambd_schedule") and not cfg.get("flag_sgd") else 0.0
        logs = cfg["n_steps"] // cfg["log_every"]
        out[fig] = {"step_s": step, "zeta_s": once * logs, "n_steps": cfg["n_steps"],
                    "n_repeats": cfg["n_repeats"], "jax": jax.__version__,
                    "extrapolated_s": step * cfg["n_steps"] * cfg["n_repeats"] + once * logs}
        print(f"{fig}: {step * 1e6:.1f} us a step", file=sys.stderr, flush=True)
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
