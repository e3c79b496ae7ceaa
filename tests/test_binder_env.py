"""What Binder does, checked: a fresh venv from requirements.txt alone, plus `postBuild` (`pip install .`),
runs every chapter of the table of contents.

Expensive (a full install, then every chapter), so it is not part of `make test`: run `make binder-check`
(it sets SLR_BINDER_CHECK=1; otherwise this test is skipped). It reuses pip's cache and, unless
SLR_BINDER_CHECK_COLD=1, the book's result cache (_build/slr-cache, keyed by the source of `slr`), as a
CI run would after `make test`.
"""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from booktoc import toc_notebooks

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / "_build" / "binder-venv"

pytestmark = pytest.mark.skipif(os.environ.get("SLR_BINDER_CHECK") != "1",
                                reason="expensive: run `make binder-check`")

# Runs inside the fresh venv: execute each notebook in its own folder, like a reader on Binder.
RUNNER = r"""
import json, sys, time
from pathlib import Path
import nbformat
from nbclient import NotebookClient
import slr
assert "site-packages" in slr.__file__, f"slr imported from {slr.__file__}, not from the installed package"
out = {}
for p in map(Path, sys.argv[1:]):
    nb = nbformat.read(p, as_version=4)
    t = time.time()
    NotebookClient(nb, kernel_name="python3", timeout=900,
                   resources={"metadata": {"path": str(p.parent)}}).execute()
    out[p.name] = round(time.time() - t, 1)
    print(f"{p.name}: {out[p.name]} s", flush=True)
print("RESULT " + json.dumps(out))
"""




def _run(cmd, env, **kw):
    print("$", " ".join(map(str, cmd)), flush=True)
    subprocess.run(list(map(str, cmd)), check=True, env=env, **kw)


def test_fresh_venv_runs_every_chapter(tmp_path):
    notebooks = toc_notebooks()
    assert notebooks, "no chapter notebook in _toc.yml"
    if VENV.exists():
        shutil.rmtree(VENV)
    python = shutil.which("python3.11") or sys.executable
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = f"{VENV / 'bin'}{os.pathsep}{env['PATH']}"
    if os.environ.get("SLR_BINDER_CHECK_COLD") == "1":
        env["SLR_CACHE_DIR"] = str(tmp_path / "slr-cache")
    else:
        env["SLR_CACHE_DIR"] = str(ROOT / "_build" / "slr-cache")
    t0 = time.time()
    _run([python, "-m", "venv", VENV], env)
    vpy = VENV / "bin" / "python"
    _run([vpy, "-m", "pip", "install", "-q", "-r", ROOT / "requirements.txt"], env)
    # repo2docker runs postBuild from the repository root (a clean copy: no .venv, no _build)
    src = tmp_path / "repo"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".venv", "_build", "artifacts", ".git",
                                                             "__pycache__", "*.egg-info"))
    _run(["bash", src / "postBuild"], env, cwd=src)
    install_s = time.time() - t0
    t1 = time.time()
    out = subprocess.run([vpy, "-c", RUNNER, *[src / n.relative_to(ROOT) for n in notebooks]],
                         env=env, cwd=tmp_path, capture_output=True, text=True)
    print(out.stdout[-5000:], out.stderr[-5000:])
    assert out.returncode == 0, f"a chapter failed in the Binder environment:\n{out.stderr[-3000:]}"
    result = json.loads(out.stdout.split("RESULT ", 1)[1])
    assert set(result) == {n.name for n in notebooks}
    print(f"binder-check: install {install_s:.0f} s, chapters {time.time() - t1:.0f} s: {result}")
