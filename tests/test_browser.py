"""Every page of the built book, opened in a real (headless) Chromium with no network beyond 127.0.0.1.

Run by `make test` after the build (`SLR_BROWSER_TEST=1`); without that variable and without a build the
test is skipped, so `pytest tests` works before a build. Where it is asked for, it fails (never skips)
when Chromium or the build is missing.

Each page of the table of contents (discovered from _toc.yml, plus the other HTML pages Sphinx writes)
must load from the local server with:
- no request to any host but 127.0.0.1 (every such request is recorded and aborted), no failed request;
- no console error and no uncaught exception;
- every piece of math typeset by MathJax: each `.math` element holds an `mjx-container`, no `mjx-merror`,
  and no raw `$$`, `\\(`, `\\[` or TeX-looking `$...$` left in the text outside code;
- no broken image (naturalWidth 0).
Screenshots of the first page and of the page with the most math go to artifacts/.
"""
import functools
import http.server
import os
import shutil
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from booktoc import toc_files

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
ARTIFACTS = ROOT / "artifacts"
CHROMIUM = os.environ.get("SLR_CHROMIUM", "/usr/bin/chromium")
REQUIRED = os.environ.get("SLR_BROWSER_TEST") == "1"
LOCAL_HOSTS = {"127.0.0.1"}
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

if not REQUIRED and not (HTML / "index.html").exists():
    pytest.skip("no built book (run `make test`, which builds it and sets SLR_BROWSER_TEST=1)",
                allow_module_level=True)


def toc_pages():
    """The HTML pages of the table of contents, in order (root first)."""
    return [f + ".html" for f in toc_files()]


def all_pages():
    """TOC pages first, then every other HTML page Sphinx wrote (index redirect, genindex, search)."""
    pages = toc_pages()
    if HTML.exists():
        skip = {"_static", "_sources", "_images", "mathjax", "widgets", "jupyter_execute"}
        for p in sorted(HTML.rglob("*.html")):
            rel = p.relative_to(HTML)
            if rel.parts[0] not in skip and str(rel) not in pages:
                pages.append(str(rel))
    return pages


# Runs in the page once it has loaded: waits for MathJax, then counts what the test checks.
PAGE_CHECK = r"""
async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
    if (MathJax.typesetPromise) { await MathJax.typesetPromise(); }
  }
  const imgs = Array.from(document.images);
  await Promise.all(imgs.map(i => i.decode().catch(() => null)));
  const math = Array.from(document.querySelectorAll('.math'));
  const untypeset = math.filter(m => !m.querySelector('mjx-container'))
                        .map(m => m.textContent.trim().slice(0, 80));
  // visible text outside code, script and typeset math
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {
    acceptNode(n) {
      const p = n.parentElement;
      if (!p || p.closest('pre, code, script, style, mjx-container, textarea, .highlight')) {
        return NodeFilter.FILTER_REJECT;
      }
      return NodeFilter.FILTER_ACCEPT;
    }});
  const raw = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const t = n.textContent;
    // display delimiters, or an inline $...$ that looks like TeX (a backslash, ^, _, =, braces, or one
    // letter: `$\\eta$`, `$x$`), not prices like "$5 and $10"
    if (['$$', '\\(', '\\[', '\\begin{'].some(d => t.includes(d))
        || /\$(?=[^$]*[\\^_={}])[^$\s][^$]*\$|\$[A-Za-z]\$/.test(t)) {
      raw.push(t.trim().slice(0, 80));
    }
  }
  return {
    mathjax: !!(window.MathJax && MathJax.version),
    math: math.length,
    containers: document.querySelectorAll('mjx-container').length,
    merrors: document.querySelectorAll('mjx-merror').length,
    untypeset: untypeset,
    raw: raw,
    images: imgs.length,
    broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')),
    widgets: document.querySelectorAll('.jupyter-widgets, .widget-slider, .lm-Widget').length,
  };
}
"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    if not (HTML / "index.html").exists():
        pytest.fail(f"no built book in {HTML}: run `make book` (or `make test`) first")
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=HTML))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        pytest.fail(f"Chromium not found at {CHROMIUM}: install Debian's `chromium` "
                    "(`make chromium`, which `make test` runs)")
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900}, service_workers="block")
        yield context
        context.close()


@pytest.fixture(scope="module")
def results(server, browser):
    """Open every page once; what each page requested, logged and rendered."""
    out = {}
    for rel in all_pages():
        page = browser.new_page()
        rec = {"external": [], "failed": [], "console": [], "errors": [], "status": None}

        def route(r, rec=rec):
            host = urlsplit(r.request.url).hostname
            if urlsplit(r.request.url).scheme in ("data", "blob") or host in LOCAL_HOSTS:
                r.continue_()
            else:
                rec["external"].append(r.request.url)
                r.abort()

        page.route("**/*", route)
        page.on("console", lambda m, rec=rec: m.type == "error" and rec["console"].append(
            f"{m.text} @ {m.location.get('url')}:{m.location.get('lineNumber')}"))
        page.on("pageerror", lambda e, rec=rec: rec["errors"].append(str(e)))
        page.on("requestfailed", lambda r, rec=rec: urlsplit(r.url).hostname in LOCAL_HOSTS
                and rec["failed"].append(f"{r.url} ({r.failure})"))
        page.on("response", lambda r, rec=rec: r.status >= 400 and rec["failed"].append(
            f"{r.url} (HTTP {r.status})"))
        if (HTML / rel).exists():
            resp = page.goto(server + rel, wait_until="load")
            rec["status"] = resp.status if resp else None
            page.wait_for_load_state("networkidle")
            rec.update(page.evaluate(PAGE_CHECK))
            page.wait_for_timeout(200)  # late console messages (widget rendering, MathJax menu)
            rec["page"] = page
        else:
            page.close()
        out[rel] = rec
    yield out
    for rec in out.values():
        if "page" in rec:
            rec["page"].close()


def test_toc_is_not_empty():
    assert len(toc_pages()) >= 2


@pytest.mark.parametrize("rel", toc_pages())
def test_toc_page_is_built(rel, results):
    assert (HTML / rel).exists(), f"{rel} is in _toc.yml but missing from the built book"
    assert results[rel]["status"] == 200, results[rel]["status"]


@pytest.mark.parametrize("rel", all_pages())
def test_page_is_self_contained(rel, results):
    rec = results[rel]
    if rec["status"] is None:
        pytest.fail(f"{rel} was not built")
    assert not rec["external"], f"{rel} requested external hosts: {rec['external']}"
    assert not rec["failed"], f"{rel}: failed requests: {rec['failed']}"
    assert not rec["console"], f"{rel}: console errors: {rec['console']}"
    assert not rec["errors"], f"{rel}: uncaught exceptions: {rec['errors']}"
    assert not rec["broken"], f"{rel}: broken images: {rec['broken']}"
    if rec["math"]:
        assert rec["mathjax"], f"{rel} has {rec['math']} math elements but MathJax did not load"
    assert not rec["untypeset"], f"{rel}: math left untypeset: {rec['untypeset'][:5]}"
    assert rec["containers"] >= rec["math"], (rel, rec["containers"], rec["math"])
    assert not rec["merrors"], f"{rel}: {rec['merrors']} MathJax errors (bad TeX)"
    assert not rec["raw"], f"{rel}: raw TeX left in the text: {rec['raw'][:5]}"


def test_the_book_has_typeset_math(results):
    """The check above must be able to fail: the book has math, and MathJax typeset it."""
    total = sum(r.get("containers", 0) for r in results.values())
    assert total > 0, "no mjx-container anywhere: MathJax never ran"


def test_screenshots(results):
    ARTIFACTS.mkdir(exist_ok=True)
    toc = [r for r in toc_pages() if "page" in results[r]]
    most_math = max(toc, key=lambda r: results[r].get("containers", 0))
    report = []
    for name, rel in (("first-page", toc[0]), ("most-math", most_math)):
        path = ARTIFACTS / f"{name}.png"
        results[rel]["page"].screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 10_000, path
    for rel in all_pages():
        r = results[rel]
        report.append(f"{rel}\tmath={r.get('math')}\tmjx-container={r.get('containers')}\t"
                      f"images={r.get('images')}\twidgets={r.get('widgets')}\texternal={len(r['external'])}\t"
                      f"console_errors={len(r['console']) + len(r['errors'])}")
    (ARTIFACTS / "browser-report.tsv").write_text("\n".join(report) + "\n")
    print("\n" + "\n".join(report))
