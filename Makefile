# sidewatch: every target creates the virtual environment in .venv and installs what it needs.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
BIN    := $(VENV)/bin

.PHONY: run demo test lint typecheck unit bench clean

run: $(VENV)/.installed ## install, then start the daemon on ./sidewatch.db
	$(BIN)/sidewatch demo

demo: $(VENV)/.installed ## print the reference six-request audit
	$(BIN)/sidewatch demo

test: $(VENV)/.installed-test lint typecheck unit ## everything CI runs

lint: $(VENV)/.installed-test
	$(BIN)/ruff check sidewatch tests bench
	$(BIN)/ruff format --check sidewatch tests bench

typecheck: $(VENV)/.installed-test
	$(BIN)/mypy

unit: $(VENV)/.installed-test
	$(BIN)/pytest

bench: $(VENV)/.installed-test ## speed figures, each beside its floor measured in the same run
	$(PY) bench/ingest.py

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[test,postgres]'
	touch $@ $(VENV)/.installed

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache sidewatch.egg-info
