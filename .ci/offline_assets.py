"""Fetch the JavaScript the built book serves itself, so no page loads anything from a CDN.

Jupyter Book 1.x loads MathJax, RequireJS and the ipywidgets HTML manager from CDNs by default; offline,
every equation would stay raw TeX. This script puts pinned copies into `_build/offline-assets/`, which
`_config.yml` lists in `html_extra_path` (Sphinx copies it as-is to the root of the HTML site):

    _build/html/mathjax/   MathJax 3 (tex-chtml-full + its woff fonts + menu/a11y components), Apache-2.0
    _build/html/widgets/   RequireJS and @jupyter-widgets/html-manager embed-amd.js, MIT / BSD-3-Clause
    _build/html/favicon.ico  the book's icon for the root redirect page, drawn here (:func:`favicon`)

Each package is fetched with `npm pack` (the npm registry's own client; falls back to the registry's
tarball URL when npm is absent) and checked against the SHA-256 pinned below. Re-running is a no-op once
the stamp matches. Usage: python .ci/offline_assets.py [DEST]
"""
import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEST = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "_build" / "offline-assets"

# name, version, sha256 of the registry tarball, {path in the package (prefix): path under DEST}
PACKAGES = [
    ("mathjax", "3.2.2", "1b9c0a1c44df864e915690558e72adb9cc5203360daefd385084ced3b6c64c09", {
        "LICENSE": "mathjax/LICENSE",
        "es5/tex-chtml-full.js": "mathjax/tex-chtml-full.js",
        "es5/output/chtml/fonts/woff-v2/": "mathjax/output/chtml/fonts/woff-v2/",
        "es5/ui/": "mathjax/ui/",
        "es5/a11y/": "mathjax/a11y/",
        "es5/sre/": "mathjax/sre/",
    }),
    ("@jupyter-widgets/html-manager", "1.0.15",
     "2b9d65cb7913e1c7d671757a10008b32c9c2448d4429513371e55c07d6107638", {
        "LICENSE": "widgets/LICENSE-html-manager",
        "dist/embed-amd.js": "widgets/embed-amd.js",
        "dist/embed.js.LICENSE.txt": "widgets/embed.js.LICENSE.txt",
        # fonts (Font Awesome) that embed-amd.js loads from <require.js baseUrl>/<module id>/../
        **{f"dist/{h}": f"widgets/@jupyter-widgets/html-manager/dist/{h}" for h in (
            "1551f4f60c37af51121f.woff2", "2285773e6b4b172f07d9.woff", "23f19bb08961f37aaf69.eot",
            "2f517e09eb2ca6650ff5.svg", "4689f52cc96215721344.svg", "491974d108fe4002b2aa.ttf",
            "527940b104eb2ea366c8.ttf", "77206a6bb316fa0aded5.eot", "7a3337626410ca2f4071.woff2",
            "7a8b4f130182d19a2d7c.svg", "9bbb245e67a133f6e486.eot", "bb58e57c48a3e911f15f.woff",
            "be9ee23c0c6390141475.ttf", "d878b0a6a1144760244f.woff2", "eeccf4f66002c6f2ba24.woff")},
    }),
    ("requirejs", "2.3.7", "31f3330c978fb28684622fe71165dc946432cf0210b2ea8a1ca0233e70f2737d", {
        "require.js": "widgets/require.js",
    }),
]


def _fetch(name, version, tmp):
    """The package tarball's bytes, via npm when available."""
    npm = shutil.which("npm")
    if npm:
        out = subprocess.run([npm, "pack", "--silent", "--json", "--pack-destination", tmp,
                              f"{name}@{version}"], check=True, capture_output=True, text=True).stdout
        return (Path(tmp) / json.loads(out)[0]["filename"]).read_bytes()
    base = name.split("/")[-1]
    url = f"https://registry.npmjs.org/{name}/-/{base}-{version}.tgz"
    with urllib.request.urlopen(url, timeout=120) as r:
        return r.read()


def favicon(dest):
    """``favicon.ico`` at the root of the site (the book's web/favicon.svg, drawn again with Pillow, pinned in
    requirements.txt): the pages declare the SVG, but the root page that Jupyter Book writes (a bare
    redirect to book/intro.html) declares none, and Chromium then asks for /favicon.ico before it follows
    the redirect, sometimes, logging a 404 (the browser test failed on it once, 2026-11-27)."""
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGBA", (64, 64), (0, 0, 0, 0))
    draw = ImageDraw.Draw(img)
    draw.rounded_rectangle((0, 0, 63, 63), radius=12, fill="#1f4e79")
    draw.text((32, 34), "slr", fill="white", anchor="mm", font=ImageFont.load_default(size=30))
    dest.mkdir(parents=True, exist_ok=True)
    img.save(dest / "favicon.ico", sizes=[(16, 16), (32, 32), (64, 64)])


def main():
    stamp = DEST / ".stamp"
    want = json.dumps([p[:3] for p in PACKAGES])
    if stamp.exists() and stamp.read_text() == want:
        favicon(DEST)
        return
    if DEST.exists():
        shutil.rmtree(DEST)
    DEST.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, version, sha, files in PACKAGES:
            data = _fetch(name, version, tmp)
            got = hashlib.sha256(data).hexdigest()
            if got != sha:
                sys.exit(f"offline_assets: {name}@{version} has sha256 {got}, expected {sha}")
            n = 0
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
                for m in tar.getmembers():
                    if not m.isfile():
                        continue
                    rel = m.name.split("/", 1)[1]  # strip the leading "package/"
                    for src, dst in files.items():
                        if rel == src or (src.endswith("/") and rel.startswith(src)):
                            target = DEST / (dst + rel[len(src):] if src.endswith("/") else dst)
                            target.parent.mkdir(parents=True, exist_ok=True)
                            target.write_bytes(tar.extractfile(m).read())
                            n += 1
            print(f"offline_assets: {name}@{version}: {n} files")
    stamp.write_text(want)
    favicon(DEST)


if __name__ == "__main__":
    main()
