"""pytest plugin: every chapter that nbval executes without a failure goes into the book's jupyter-cache.

`make test` runs the chapters once, under nbval (`pytest --nbval-lax book -p tests.nbval_cache`). For each
notebook whose cells all passed, this plugin writes the executed notebook (nbval's outputs of every code
cell, the ipywidgets state of the kernel, the execution time) into the jupyter-cache that the book build
reads (`execute.cache` of `_config.yml`). myst-nb matches a notebook to the cache by the hash of its code
cells' sources and kernelspec, so the build that follows (`execute_notebooks: cache`) renders those outputs
instead of executing the chapter a second time; a chapter edited after the nbval run no longer matches and
is executed by the build as usual. A notebook with a failed or skipped cell is never cached. nbval
executes cells without storing the history, so a trailing `;` would not hide a cell's result: the plugin
runs cells with the history stored, as Jupyter and the build do.

With ``--skip-cached`` (`make book`) the notebooks already in the cache (matched as the build matches them)
are left out: a second `make book` executes only the chapters edited since. The controlling process creates
the cache before pytest-xdist starts its workers (:func:`_create_cache`), so no two workers create its tables,
and it alone writes the cache: each worker hands its executed notebooks to it (xdist's ``workeroutput``), and
it files them one after the other at the end of the session (:func:`_write`).
"""
from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import nbformat
import pytest

_WIDGET_STATE_CODE = (
    "import json as _j, sys as _s\n"
    "_w = _s.modules.get('ipywidgets')\n"
    "print(_j.dumps(_w.Widget.get_manager_state(drop_defaults=True) if _w else None))\n"
    "del _j, _s, _w\n"
)


_OUTPUT_KEY = "nbval_cache_executed"   # the workers' executed notebooks, in xdist's workeroutput


def _cache_dir(config) -> Path:
    """The `execute: cache:` folder of `_config.yml`, relative to the root of the repository."""
    root = Path(str(config.rootpath))
    for line in (root / "_config.yml").read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("cache:"):
            value = stripped.split(":", 1)[1].split("#", 1)[0].strip().strip("'\"")
            if value:
                return root / value
    raise ValueError("_config.yml has no `execute: cache:` folder for the executed notebooks")


def _widget_state(nbfile):
    """The kernel's ipywidgets state (what nbclient stores in the notebook's metadata), or None."""
    kernel = nbfile.kernel
    msg_id = kernel.execute_cell_input(_WIDGET_STATE_CODE, allow_stdin=False)
    kernel.await_reply(msg_id, timeout=60)
    text = ""
    while True:
        msg = nbfile.get_kernel_message(timeout=60)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
        if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
            text += msg["content"]["text"]
        if msg["msg_type"] == "error":
            return None
    return json.loads(text) if text.strip() else None


class _Recorder:
    def __init__(self, config):
        self.config = config
        self.failed: set[str] = set()       # notebooks with a failed or skipped cell
        self.cells: dict[str, list] = {}    # notebook path -> its executed cell items, in order
        self.started: dict[str, float] = {}
        self.seconds: dict[str, float] = {}
        self.widgets: dict[str, dict] = {}
        self.received: list = []             # (path, notebook, seconds) from pytest-xdist workers
        self.workers = 0                     # pytest-xdist workers that finished (controller)
        self.passed: set[str] = set()        # notebooks with a passed cell (controller: from all workers)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        path = str(item.path)
        self.started.setdefault(path, time.perf_counter())
        yield
        if not hasattr(item, "test_outputs"):
            return
        self.cells.setdefault(path, []).append(item)
        self.seconds[path] = time.perf_counter() - self.started[path]
        siblings = [i for i in item.session.items if str(i.path) == path]
        if item is siblings[-1] and item.parent.kernel.is_alive():
            try:
                state = _widget_state(item.parent)
            except Exception:  # noqa: BLE001 - no state is a rendering loss, never a test failure
                state = None
            if state and state.get("state"):
                self.widgets[path] = state

    def pytest_runtest_logreport(self, report):
        path = str(Path(str(self.config.rootpath)) / report.nodeid.split("::")[0])
        if report.failed or (report.skipped and report.when == "call"):
            self.failed.add(path)
        elif report.when == "call" and report.passed:
            self.passed.add(path)

    def _executed(self):
        """The executed notebooks of this process whose cells all passed: (path, notebook, seconds)."""
        for path, items in self.cells.items():
            if path in self.failed:
                continue
            nb = copy.deepcopy(items[0].parent.nb)
            code = [c for c in nb.cells if c.cell_type == "code"]
            if len(code) != len(items):
                continue
            for count, (cell, item) in enumerate(zip(code, items), start=1):
                cell.execution_count = count
                outputs = []
                for out in item.test_outputs or []:
                    out = nbformat.from_dict(dict(out))
                    if out.output_type == "execute_result":
                        out.execution_count = count
                    outputs.append(out)
                cell.outputs = outputs
            if path in self.widgets:
                nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": self.widgets[path]}
            yield path, nb, self.seconds.get(path)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        """The controlling process receives each pytest-xdist worker's executed notebooks."""
        self.workers += 1
        for path, text, seconds in getattr(node, "workeroutput", {}).get(_OUTPUT_KEY, []):
            self.received.append((path, nbformat.reads(text, as_version=4), seconds))

    def pytest_sessionfinish(self, session, exitstatus):
        executed = list(self._executed())
        if hasattr(self.config, "workeroutput"):   # a pytest-xdist worker: hand them to the controller
            self.config.workeroutput[_OUTPUT_KEY] = [(path, nbformat.writes(nb), seconds)
                                                     for path, nb, seconds in executed]
            return
        _write(self.config, executed + self.received)
        lost = sorted(self.passed - self.failed - {path for path, _, _ in self.received}) if self.workers else []
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if lost and reporter is not None:   # a worker sent nothing for them: the build executes them again
            reporter.write_line(f"nbval_cache: not cached, no executed notebook came back: {lost}")


def _write(config, executed):
    """File the executed notebooks into the jupyter-cache, one after the other, in one process, and
    raise if a record is missing afterwards. When each pytest-xdist worker filed its own notebooks at the
    end of its session, a record went missing without an error now and then (2026-11-30, beside other
    jobs: tests/test_nbval_cache.py's case of two one-cell notebooks on two workers, which finish at
    the same moment, kept 1 of its 2 records in 2 of 17 runs): a worker's exception in
    ``pytest_sessionfinish`` comes after it has reported its end, so xdist does not show it. One
    writer, in the process that reports errors, removes both the concurrency and the silence."""
    if not executed:
        return
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    cache = get_cache(str(_cache_dir(config)))
    for path, nb, seconds in executed:
        cache.cache_notebook_bundle(CacheBundleIn(nb, path, data={"execution_seconds": seconds}),
                                    check_validity=False, overwrite=True)
    missing = []
    for path, nb, _ in executed:
        try:
            cache.match_cache_notebook(nb)
        except KeyError:
            missing.append(path)
    if missing:
        raise RuntimeError(f"the jupyter-cache lost the executed notebooks {missing}")


def _execute_as_jupyter(self, cell_input, allow_stdin=None):
    """nbval's kernel call, with the history stored as Jupyter (and the book build's nbclient) do: a cell
    ending in `;` shows no result, and execution counts advance."""
    return self.kc.execute(cell_input, store_history=True, allow_stdin=allow_stdin, stop_on_error=False)


def pytest_addoption(parser):
    parser.addoption("--skip-cached", action="store_true", default=False,
                     help="leave out the notebooks whose execution the book's jupyter-cache already holds")


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--skip-cached"):
        return
    from jupyter_cache import get_cache

    cache, cached = get_cache(str(_cache_dir(config))), {}
    for path in {str(item.path) for item in items}:
        try:
            cache.match_cache_notebook(nbformat.read(path, as_version=4))
            cached[path] = True
        except KeyError:
            cached[path] = False
    drop = [item for item in items if cached[str(item.path)]]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = [item for item in items if not cached[str(item.path)]]


def _create_cache(config):
    """Create the jupyter-cache (its folder and SQLite tables) if it does not exist yet. jupyter-cache
    creates its tables on first use, so two pytest-xdist workers opening a fresh cache at once could both
    try to: `make book` from a fresh clone failed so ("table settings already exists", 2026-11-27)."""
    from jupyter_cache import get_cache

    get_cache(str(_cache_dir(config))).list_cache_records()


def pytest_configure(config):
    from nbval.kernel import RunningKernel

    RunningKernel.execute_cell_input = _execute_as_jupyter
    config.pluginmanager.register(_Recorder(config), "nbval-cache-recorder")
    if not hasattr(config, "workerinput"):  # the controlling process: before any xdist worker starts
        _create_cache(config)
