# The two commands of the README: `make book` and `make test`.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
JB_FLAGS := -n -W --keep-going
# MathJax 3, RequireJS and the ipywidgets HTML manager, served by the book itself (html_extra_path).
ASSETS := _build/offline-assets/.stamp
# Debian packages installed only where absent (root, or sudo when available).
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT    := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get
# JAX's persistent compilation cache, shared by the unit tests (tests/conftest.py), nbval and the book
# build: a second run compiles nothing. Every program is cached, however small. `make clean` empties it.
export JAX_COMPILATION_CACHE_DIR := $(CURDIR)/_build/jax-cache
export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS := 0
export JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES := 0
# Python's bytecode cache on, whatever the environment says: with PYTHONDONTWRITEBYTECODE set (this machine's
# shell sets it) every process compiles the source of each module it imports again, and `make test` starts
# dozens of processes (a kernel per chapter, the test workers, the builds). Measured 2026-11-27 on a fresh clone:
# importing jax, scipy, matplotlib and slr took 5.4 s without the cache and 1.9 s with it, torch and
# transformers (the probe) 10.5 s against 4.7 s. The bytecode goes to __pycache__ folders (.gitignore).
# `make test` from fresh clones, alone, in turn (2026-11-27, morning): 990.6 and 986.6 s with the variable
# set, 913.8 and 957.4 s without (user + sys CPU 1775.7 and 1753.9 s against 1639.7 and 1721.7 s;
# benchmarks/README.md).
unexport PYTHONDONTWRITEBYTECODE
# The unit suite on every core (pytest-xdist; pyproject.toml sends one test file to each worker).
UNIT   := $(BIN)/python -m pytest tests -q --ignore=tests/test_browser.py -n auto
# Every chapter under nbval, once: tests/nbval_cache.py files each chapter that passes, with its outputs, into
# the book's jupyter-cache, so the book build that follows renders it without executing it again.
# The chapters run two at a time (pytest-xdist, one notebook per worker, `--dist loadfile`), in the order
# given, the costliest first (their times two at a time on 2026-11-26), so that no long chapter starts
# last; a chapter not listed comes after them. Each is named: given the directory `book`, pytest collects
# its notebooks in alphabetical order whatever else is named (it then ran the Transformer chapter last).
ORDER  := transformer pgd beyond_open_questions probe beyond_linear_attention related linear landscape \
          beyond_activations proofs oracle attention task
CHAPTERS := $(ORDER:%=book/%.ipynb) $(filter-out $(ORDER:%=book/%.ipynb),$(sort $(wildcard book/*.ipynb)))
NBVAL  := $(BIN)/python -m pytest --nbval-lax $(CHAPTERS) -q -p tests.nbval_cache -n 2

# The course edition (exercise solutions hidden), built from the same jupyter-cache: its own config and
# output folder (nothing shared with the book's build but the cache, which both only read once nbval has
# filled it), then checked and published under _build/html/course/.
define COURSE_BUILD
	@mkdir -p _build/course
	sed -e 's/^\(    hide_solutions:\) false/\1 true/' \
	    -e 's|^\(    [a-z_]*:\) web/$$|\1 $(CURDIR)/web/|' _config.yml > _build/course/_config.yml
	grep -q '^    hide_solutions: true' _build/course/_config.yml
	$(BIN)/jupyter-book build . $(JB_FLAGS) --config _build/course/_config.yml --path-output _build/course
endef
define COURSE_PUBLISH
	@! grep -rl 'class="solution' _build/course/_build/html --include='*.html' || (echo "solutions left in the course build"; false)
	rm -rf _build/html/course && cp -r _build/course/_build/html _build/html/course
endef
define COURSE
	$(COURSE_BUILD)
	$(COURSE_PUBLISH)
endef

.PHONY: install assets chromium graphviz book test test-unit test-browser html course-html unit notebooks browser course pdf colab-check binder-check build-check bench bench-authors clean

install: $(STAMP)

# --no-compile: no bytecode for the whole venv up front; Python compiles each module the first time it is
# imported and keeps it, and most are never imported (install and assets on fresh clones, 2026-11-26:
# 28-42 s, against 75.7 s for the install alone before; benchmarks/README.md).
$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q --no-compile -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	@touch $(STAMP)

assets: $(ASSETS)

$(ASSETS): .ci/offline_assets.py | $(STAMP)
	$(BIN)/python .ci/offline_assets.py

## The headless browser of the browser test (Debian's, never one downloaded by a tool).
chromium:
	@command -v chromium >/dev/null || ($(APT) update -q && $(APT) install -y -q chromium chromium-driver)

## Graphviz's `dot` draws the map of the paper's results (web/claims_ledger.py), from Debian's package.
graphviz:
	@command -v dot >/dev/null || ($(APT) update -q && $(APT) install -y -q graphviz)

## Execute every chapter and build the HTML book (warnings are errors). The chapters run as in `make test`,
## two at a time under nbval into the jupyter-cache, leaving out those the cache already holds
## (--skip-cached: exit status 5 when every chapter is there); the two builds then render them.
book: install assets graphviz
	$(NBVAL) --skip-cached || [ $$? = 5 ]
	$(MAKE) --no-print-directory -j2 --output-sync=target html course-html
	$(COURSE_PUBLISH)
	@echo "The book is at $(CURDIR)/_build/html/index.html"

## nbval run of every chapter, then the unit tests beside the book build and the browser test: the browser
## test (every page in headless Chromium) waits on page loads much of the time, so the unit suite, CPU-bound
## and niced below it, fills both cores meanwhile (benchmarks/README.md: about 235 s for this step against 306 s
## in turn; beside nbval instead, even at nice 19, it slowed the chapters from 617 s to 809 s).
## --output-sync prints each step's output whole; the two builds run at once, beside the unit suite (-j3).
test: install assets chromium graphviz
	$(NBVAL)
	$(MAKE) --no-print-directory -j3 --output-sync=target test-unit test-browser

test-unit: install
	nice -n 10 $(UNIT)

test-browser: html course-html
	$(COURSE_PUBLISH)
	SLR_BROWSER_TEST=1 $(BIN)/python -m pytest tests/test_browser.py tests/test_ledger.py -q

## The book's HTML and the course edition's from the executed chapters (the jupyter-cache), no publishing:
## `make test` builds the two at once, one per core, once nbval has executed every chapter into the cache.
html: install assets graphviz
	$(BIN)/jupyter-book build . $(JB_FLAGS)
course-html: install assets graphviz
	$(COURSE_BUILD)
## The unit suite alone, with its 20 slowest tests (issue 12 asks < 90 s cold on 2 cores; measured alone on
## 2026-11-26: about 160 s, most of it XLA compilation).
unit: install
	$(UNIT) --durations=20

notebooks: install
	$(NBVAL)

## The browser test alone, on the book already built in _build/html.
browser: install chromium
	SLR_BROWSER_TEST=1 $(BIN)/python -m pytest tests/test_browser.py tests/test_ledger.py -q

## The book for a course: exercise solutions left out (sphinx-exercise hide_solutions), built from the same
## executed chapters (the jupyter-cache) in _build/course/_build/html and published with the book under
## _build/html/course/ (the syllabus links to it). `make book` and `make test` build it too.
course: install assets graphviz
	$(COURSE)
	@echo "The course book (no solutions) is at $(CURDIR)/_build/html/course/index.html"

## The whole book as one PDF (pdflatex), _build/latex/book.pdf. Not part of `make test` (slow).
pdf: install graphviz
	@command -v latexmk >/dev/null && command -v pdfinfo >/dev/null && kpsewhich tgtermes.sty >/dev/null \
	  || ($(APT) update -q && $(APT) install -y -q latexmk texlive-latex-recommended \
	      texlive-fonts-recommended texlive-latex-extra tex-gyre poppler-utils)
	$(BIN)/jupyter-book build . $(JB_FLAGS) --builder pdflatex
	@! grep -E "LaTeX Warning: (Hyper r|R)eference .* undefined|There were undefined references" _build/latex/book.log \
	  || (echo "unresolved cross-references in the PDF"; false)
	pdfinfo _build/latex/book.pdf | grep Pages

## What Binder does: a fresh venv from requirements.txt alone plus `pip install .` runs every chapter.
## What Colab does: a venv with only Colab's own packages, then every chapter with its setup cell (which
## installs slr[book] from the repository URL, redirected to this checkout). Slow; not part of `make test`.
colab-check: install
	SLR_COLAB_CHECK=1 $(BIN)/python -m pytest tests/test_colab_env.py -q -s

binder-check:
	SLR_BINDER_CHECK=1 $(BIN)/python -m pytest tests/test_binder_env.py -q -s

bench: install
	$(BIN)/python benchmarks/bench_figures.py

## The Section 5 figures against the authors' own code, timed in one run: `make bench-authors AUTHORS=DIR`
## with DIR a clone of github.com/PierreMarion23/single-location-regression (see benchmarks/bench_authors.py).
bench-authors: install
	$(BIN)/python benchmarks/bench_authors.py --authors $(AUTHORS)

clean:
	rm -rf _build
