# The two commands of the README: `make book` and `make test`.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
JB_FLAGS := -n -W --keep-going

.PHONY: install book test unit notebooks build-check bench clean

install: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	@touch $(STAMP)

## Execute every chapter and build the HTML book (warnings are errors).
book: install
	$(BIN)/jupyter-book build . $(JB_FLAGS)
	@echo "The book is at $(CURDIR)/_build/html/index.html"

## Unit tests, nbval run of every chapter, then the book build check.
test: install
	$(BIN)/python -m pytest tests -q
	$(BIN)/python -m pytest --nbval-lax book -q
	$(BIN)/jupyter-book build . $(JB_FLAGS)

unit: install
	$(BIN)/python -m pytest tests -q

notebooks: install
	$(BIN)/python -m pytest --nbval-lax book -q

bench: install
	$(BIN)/python benchmarks/bench_figures.py

clean:
	rm -rf _build
