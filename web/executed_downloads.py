"""Sphinx extension: the download button of a chapter offers the executed notebook, with its outputs.

The chapters are committed without outputs, and Sphinx copies each source as it is into ``_sources/``,
where the theme's "download .ipynb" button points. Once the HTML is written, this extension replaces
each chapter's ``_sources/<doc>.ipynb`` by the executed notebook of this build, read from the book's
jupyter-cache (``execute.cache`` in ``_config.yml``: myst-nb executed the chapter into it, or nbval did
and myst-nb used it): a reader who downloads a chapter gets every figure and number the page shows. It
fails the build if a chapter has no executed notebook with outputs in the cache.
"""
from __future__ import annotations

from pathlib import Path

from sphinx.errors import ExtensionError


def replace_sources(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    import nbformat
    from jupyter_cache import get_cache

    cache = get_cache(str(app.env.mystnb_config.execution_cache_path))
    for docname in sorted(app.env.found_docs):
        source = Path(app.srcdir) / f"{docname}.ipynb"
        if not source.exists():
            continue
        try:
            _, executed = cache.merge_match_into_notebook(nbformat.read(source, as_version=4))
        except KeyError:
            raise ExtensionError(f"executed_downloads: {docname} has no executed notebook in the cache "
                                 f"{app.env.mystnb_config.execution_cache_path}") from None
        if not any(c.get("outputs") for c in executed.cells if c.cell_type == "code"):
            raise ExtensionError(f"executed_downloads: the executed {docname} has no output")
        target = Path(app.outdir) / "_sources" / f"{docname}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(executed, target)


def setup(app):
    app.connect("build-finished", replace_sources)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
