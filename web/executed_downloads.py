"""Sphinx extension: the download button of a chapter offers the executed notebook, with its outputs.

The chapters are committed without outputs, and Sphinx copies each source as it is into ``_sources/``,
where the theme's "download .ipynb" button points. Once the HTML is written, this extension replaces
each chapter's ``_sources/<doc>.ipynb`` by the notebook myst-nb executed (or took from the jupyter-cache)
for this build, ``jupyter_execute/<doc>.ipynb`` beside the output folder: a reader who downloads a
chapter gets every figure and number the page shows. It fails the build if a chapter has no executed
notebook.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from sphinx.errors import ExtensionError


def replace_sources(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    executed = Path(app.outdir).parent / "jupyter_execute"
    for docname in sorted(app.env.found_docs):
        if not (Path(app.srcdir) / f"{docname}.ipynb").exists():
            continue
        target = Path(app.outdir) / "_sources" / f"{docname}.ipynb"
        source = executed / f"{docname}.ipynb"
        if not source.exists():
            raise ExtensionError(f"executed_downloads: no executed notebook {source} for {docname}")
        cells = json.loads(source.read_text())["cells"]
        if not any(c.get("outputs") for c in cells if c["cell_type"] == "code"):
            raise ExtensionError(f"executed_downloads: {source} has no output")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def setup(app):
    app.connect("build-finished", replace_sources)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
