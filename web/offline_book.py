"""Sphinx extension: keep the built book self-contained and its browser console clean.

- Checks that `html_extra_path` holds the local MathJax / widget assets (run `make book`, which fetches them
  with `.ci/offline_assets.py`), so a build never silently falls back to a CDN.
- Removes duplicate inline scripts: sphinx-thebe 0.3.1 registers its `const THEBE_JS_URL = ...` script once
  per `env-before-read-docs`, and a second copy on a page is a SyntaxError ("already been declared").
- Course build (`hide_solutions: true`): sphinx-exercise 1.2.1 drops `solution-start` but keeps the text
  between `solution-start` and `solution-end` (the solution itself!) and a `solution_end_node` no HTML or
  LaTeX writer knows. Here both gated directives become markers and everything between them is removed.
- Adds a tiny bridge for the ipywidgets HTML manager, which typesets widget labels through the MathJax 2
  API (`MathJax.Hub.Queue`) while the book serves MathJax 3.
"""
import re
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.errors import ConfigError
from sphinx.transforms import SphinxTransform
from sphinx.util.docutils import SphinxDirective

HUB_BRIDGE = """
document.addEventListener("DOMContentLoaded", function () {
  var MJ = window.MathJax;
  if (!MJ || !MJ.version || MJ.version.charAt(0) !== "3" || MJ.Hub) { return; }
  MJ.Hub = {Queue: function () {
    var els = [];
    for (var i = 0; i < arguments.length; i++) {
      var a = arguments[i];
      if (Array.isArray(a) && a[0] === "Typeset" && a[2]) { els.push(a[2]); }
    }
    if (els.length && MJ.startup && MJ.startup.promise) {
      MJ.startup.promise.then(function () { return MJ.typesetPromise(els); });
    }
  }};
});
"""


ASSETS = ("mathjax/tex-chtml-full.js", "widgets/require.js", "widgets/setup.js", "widgets/embed-amd.js")


def _check_assets(app):
    """The HTML build serves its own MathJax and widget manager, or fails (never a CDN fallback)."""
    if app.builder.format != "html":
        return
    config = app.config
    remote = [u for u in [config.mathjax_path, *config.nb_ipywidgets_js] if "://" in u]
    if remote:
        raise ConfigError(f"the book must not load scripts from other hosts: {remote}")
    roots = [Path(app.confdir, extra) for extra in config.html_extra_path]
    missing = [a for a in ASSETS if not any((r / a).is_file() for r in roots)]
    if missing:
        raise ConfigError(f"offline assets {missing} are in no html_extra_path folder {roots}: "
                          "run `make book` (it fetches them with .ci/offline_assets.py)")


def _dedupe_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for js in scripts:
        key = (str(getattr(js, "filename", js) or ""),  # inline scripts: None or ""
               tuple(sorted((k, str(v)) for k, v in getattr(js, "attributes", {}).items())))
        if key in seen:
            continue
        seen.add(key)
        kept.append(js)
    scripts[:] = kept


class hidden_solution_start(nodes.Element):
    pass


class hidden_solution_end(nodes.Element):
    pass


class HiddenSolutionStart(SphinxDirective):
    """`solution-start` in the course build: a marker; the solution's text follows it."""
    required_arguments = 1
    final_argument_whitespace = True
    has_content = True
    option_spec = {"label": directives.unchanged_required, "class": directives.class_option,
                   "hidden": directives.flag}

    def run(self):
        node = hidden_solution_start()
        self.set_source_info(node)
        return [node]


class HiddenSolutionEnd(SphinxDirective):
    has_content = False

    def run(self):
        return [hidden_solution_end()]


class RemoveHiddenSolutions(SphinxTransform):
    """Remove each hidden solution: its start marker, its text, its end marker."""
    default_priority = 5

    def apply(self):
        for start in list(self.document.findall(hidden_solution_start)):
            parent = start.parent
            i = parent.index(start)
            for j in range(i + 1, len(parent.children)):
                if isinstance(parent[j], hidden_solution_end):
                    del parent[i:j + 1]
                    break
            else:
                raise ConfigError(f"{start.source}:{start.line}: solution-start without a solution-end "
                                  "at the same level")
        for end in list(self.document.findall(hidden_solution_end)):
            raise ConfigError(f"{end.source}:{end.line}: solution-end without a solution-start")


def _course_build(app, config):
    if config.hide_solutions:
        app.add_directive("solution-start", HiddenSolutionStart, override=True)
        app.add_directive("solution-end", HiddenSolutionEnd, override=True)


def _latex_equation_tags(app, doctree, docname):
    """The paper's equation numbers are written with ``\\tag{N}``. MathJax right-aligns them in the HTML;
    Sphinx's LaTeX writer wraps display math in ``split``, where amsmath forbids ``\\tag``, so in the PDF
    the number is set after the formula instead."""
    if app.builder.format != "latex":
        return
    for node in list(doctree.findall(nodes.math_block)):
        text = node.astext()
        if "\\tag{" in text:
            node.children = [nodes.Text(re.sub(r"\\tag\{([^}]*)\}", r"\\qquad(\1)", text))]


def setup(app):
    app.add_node(hidden_solution_start)
    app.add_node(hidden_solution_end)
    app.add_transform(RemoveHiddenSolutions)
    app.connect("config-inited", _course_build)
    app.connect("builder-inited", _check_assets)
    app.connect("doctree-resolved", _latex_equation_tags)
    app.add_js_file(None, body=HUB_BRIDGE, priority=900)
    # early: `html-page-context` is emitted with emit_firstresult, so a late listener may never run
    app.connect("html-page-context", _dedupe_scripts, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
