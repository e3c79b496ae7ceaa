"""The Colab path, checked: a fresh venv with only what Colab provides (Python, numpy, scipy, matplotlib,
jax, torch, ipywidgets, and the kernel), then each chapter run as it is, its setup cell included. The
setup cell installs `slr[book]` from the repository URL of `_config.yml`; here git rewrites that URL to
this checkout (a temporary global git config with `insteadOf`), so the check needs no network beyond
the package registry and tests the committed HEAD.

Expensive (an install, then every chapter): not part of `make test`. Run `make colab-check` (it sets
SLR_COLAB_CHECK=1; otherwise this test is skipped).
"""
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from booktoc import toc_notebooks

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / "_build" / "colab-venv"
COLAB = ("numpy", "scipy", "matplotlib", "jax", "jaxlib", "ml_dtypes", "opt_einsum", "torch", "ipywidgets",
         "ipykernel", "nbclient", "nbformat")

pytestmark = pytest.mark.skipif(os.environ.get("SLR_COLAB_CHECK") != "1",
                                reason="expensive: run `make colab-check`")

RUNNER = r"""
import sys, time
from datetime import datetime
from pathlib import Path
import nbformat
from nbclient import NotebookClient
for p in map(Path, sys.argv[1:]):
    nb = nbformat.read(p, as_version=4)
    t = time.time()
    NotebookClient(nb, kernel_name="python3", timeout=1800,
                   resources={"metadata": {"path": str(p.parent)}}).execute()
    total = time.time() - t
    secs, first, last = [], None, None
    for i, c in enumerate(nb.cells):
        ex = c.get("metadata", {}).get("execution", {})
        if "iopub.execute_input" in ex and "shell.execute_reply" in ex:
            a, b = (datetime.fromisoformat(ex[k].replace("Z", "+00:00")).timestamp()
                    for k in ("iopub.execute_input", "shell.execute_reply"))
            secs.append((b - a, i))
            first, last = first or a, b
    print(f"{p.name}: {total:.1f} s, {sum(s for s, _ in secs):.1f} s in cells, kernel start "
          f"{first - t:.1f} s, after the last cell {t + total - last:.1f} s; slowest (s, cell):",
          [(round(s, 1), i) for s, i in sorted(secs, reverse=True)[:4]], flush=True)
"""


def _pins(names):
    """The versions requirements.txt pins for Colab's own packages (Colab has them preinstalled)."""
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        m = re.match(r"([A-Za-z0-9_.\-]+)==(\S+)", line)
        if m and m.group(1).lower().replace("-", "_") in {n.replace("-", "_") for n in names}:
            pins[m.group(1)] = m.group(2)
    return [f"{k}=={v}" for k, v in pins.items()]


def test_colab_like_venv_runs_every_chapter(tmp_path):
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    if VENV.exists():
        shutil.rmtree(VENV)
    drop = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "JAX_COMPILATION_CACHE_DIR")  # Colab: no JAX cache
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PATH"] = f"{VENV / 'bin'}{os.pathsep}{env['PATH']}"
    env["SLR_CACHE_DIR"] = str(tmp_path / "slr-cache")
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text(f'[url "file://{ROOT}"]\n\tinsteadOf = {url}\n[safe]\n\tdirectory = *\n')
    env["GIT_CONFIG_GLOBAL"] = str(gitconfig)
    t0 = time.time()
    subprocess.run([shutil.which("python3.11") or sys.executable, "-m", "venv", VENV], check=True, env=env)
    vpy = VENV / "bin" / "python"
    subprocess.run([vpy, "-m", "pip", "install", "-q", *_pins(COLAB)], check=True, env=env)
    probe = subprocess.run([vpy, "-c", "import importlib.util as u; print(u.find_spec('slr'), "
                            "u.find_spec('myst_nb'))"], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert probe.stdout.split() == ["None", "None"], "the Colab-like venv must start without slr/myst_nb"
    install_s = time.time() - t0
    src = tmp_path / "book"
    shutil.copytree(ROOT / "book", src)
    notebooks = [src / n.name for n in toc_notebooks()]
    t1 = time.time()
    log = tmp_path / "stderr.txt"
    with log.open("w") as err:  # each chapter's time is printed as soon as it finishes
        proc = subprocess.Popen([vpy, "-c", RUNNER, *notebooks], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                                stderr=err, text=True)
        for line in proc.stdout:
            print(line, end="", flush=True)
        returncode = proc.wait()
    tail = log.read_text()[-3000:]
    assert returncode == 0, f"a chapter failed in the Colab-like environment:\n{tail}"
    print(f"Colab check: base install {install_s:.0f} s, chapters {time.time() - t1:.0f} s")
