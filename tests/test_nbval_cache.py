"""tests/nbval_cache.py: a chapter that passes nbval lands in the jupyter-cache the book build reads; one
that fails does not (the control), and an edited chapter no longer matches its cached execution."""
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_cache import get_cache

ROOT = Path(__file__).resolve().parents[1]


def _notebook(path, *sources):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell("# A chapter")]
    nb.cells += [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, path)
    return nb


def _nbval(project, name, *more):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval-lax", name, "-q", "-p", "tests.nbval_cache",
         "-p", "no:cacheprovider", "--rootdir", str(project), "-c", str(project / "pytest.ini"), *more],
        cwd=project, env=env, capture_output=True, text=True, timeout=300)


def test_passing_chapter_is_cached_failing_one_is_not(tmp_path):
    (tmp_path / "_config.yml").write_text("execute:\n  execute_notebooks: cache\n  cache: _build/jc  # here\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    good = _notebook(tmp_path / "good.ipynb", "x = 6 * 7\nprint(x)", "x + 1", "x + 2;  # hidden")
    bad = _notebook(tmp_path / "bad.ipynb", "print('before')", "raise ValueError('boom')")
    run = _nbval(tmp_path, ".")
    assert run.returncode == 1, run.stdout + run.stderr  # bad.ipynb fails, good.ipynb passes
    assert "deselected" not in run.stdout    # control for --skip-cached below: an empty cache skips nothing
    cache = get_cache(str(tmp_path / "_build" / "jc"))
    record = cache.match_cache_notebook(good)
    assert record.data["execution_seconds"] > 0
    _, merged = cache.merge_match_into_notebook(nbformat.read(tmp_path / "good.ipynb", 4))
    code = [c for c in merged.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == [1, 2, 3]
    assert code[0].outputs[0].text == "42\n"
    assert code[1].outputs[0].data["text/plain"] == "43"   # control for the next: a result is shown
    assert code[2].outputs == []                             # a trailing `;` hides it, as in Jupyter
    with pytest.raises(KeyError):  # control: the failing chapter is never cached
        cache.match_cache_notebook(bad)
    again = _nbval(tmp_path, "good.ipynb", "bad.ipynb", "--skip-cached")  # make book: no second run
    assert again.returncode == 1, again.stdout + again.stderr    # bad.ipynb's two cells run again
    assert "1 failed, 1 passed, 3 deselected" in again.stdout, again.stdout  # good.ipynb's three do not
    edited = _notebook(tmp_path / "good.ipynb", "x = 6 * 7\nprint(x)", "x + 1", "x + 3;")
    with pytest.raises(KeyError):  # control: an edited chapter no longer matches its old execution
        cache.match_cache_notebook(edited)


_NO_WRITES_IN_WORKERS = """
import os
from pathlib import Path


def pytest_configure(config):
    if hasattr(config, "workerinput"):   # a pytest-xdist worker: writing the cache leaves a mark and raises
        from jupyter_cache.cache.main import JupyterCacheBase
        root = Path(str(config.rootpath))
        (root / f"armed-{os.getpid()}").write_text("")

        def refuse(*args, **kwargs):
            (root / f"worker-wrote-{os.getpid()}").write_text("")
            raise RuntimeError("a pytest-xdist worker wrote the jupyter-cache")

        JupyterCacheBase.cache_notebook_bundle = refuse
"""


def test_the_cache_is_created_before_the_workers_start(tmp_path):
    """`make book`'s run (`-n 2 --skip-cached`) on a fresh clone: the controlling process creates the
    cache's tables before pytest-xdist starts its workers, so no two workers create them at once (the race
    failed a fresh clone's `make book`; it is timing-dependent, so this checks when the tables are made: at
    configure, by a collection that runs and looks up nothing, in a process without xdist; then a run on
    two workers passes and files both chapters). Control: a collection without the plugin leaves no cache.
    The two one-cell notebooks finish at the same moment on the two workers; the controlling process alone
    writes the cache: a conftest makes the cache's writing raise in a worker (and leave a mark), and the
    run leaves no mark (control: the conftest was armed in both workers)."""
    (tmp_path / "_config.yml").write_text("execute:\n  cache: _build/jc\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    _notebook(tmp_path / "one.ipynb", "1 + 1")
    db = tmp_path / "_build" / "jc" / "global.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    bare = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), "-c", str(tmp_path / "pytest.ini"), "--nbval-lax", "."],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert bare.returncode == 0 and not db.exists(), bare.stdout + bare.stderr      # control
    collected = _nbval(tmp_path, ".", "--collect-only")
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert db.exists()                         # made at configure: nothing ran, nothing was looked up
    _notebook(tmp_path / "two.ipynb", "2 + 2")
    (tmp_path / "conftest.py").write_text(_NO_WRITES_IN_WORKERS)
    run = _nbval(tmp_path, ".", "-n", "2", "--skip-cached")
    assert run.returncode == 0 and "2 passed" in run.stdout, run.stdout + run.stderr
    assert len(get_cache(str(db.parent)).list_cache_records()) == 2
    assert len(list(tmp_path.glob("armed-*"))) == 2             # control: the check ran in both workers
    assert not list(tmp_path.glob("worker-wrote-*"))
