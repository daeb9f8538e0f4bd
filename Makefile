# sidewatch: every target creates the virtual environment in .venv and installs what it needs.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
BIN    := $(VENV)/bin
TOOLS  := .tools
PROMTOOL := $(TOOLS)/prometheus/usr/bin/promtool
ALERTMANAGER := $(TOOLS)/alertmanager/usr/bin/prometheus-alertmanager
PGBOUNCER := $(TOOLS)/pgbouncer/usr/sbin/pgbouncer
export SIDEWATCH_PROMTOOL := $(abspath $(PROMTOOL))
export SIDEWATCH_ALERTMANAGER := $(abspath $(ALERTMANAGER))
export SIDEWATCH_PGBOUNCER := $(abspath $(PGBOUNCER))
# Debian's Chromium, headless: the HTML report's browser test and the example screenshot
CHROMIUM ?= /usr/bin/chromium
CHROMIUM_FLAGS := --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	--disable-background-networking --disable-component-update --disable-sync --hide-scrollbars
EXAMPLE := reports/sidewatch-report-example
# Producers whose pins clash with sidewatch's (ag-ui-protocol, pydantic, opentelemetry) get a
# virtual environment of their own, .tools/venv-<name>, from tests/producers/requirements-<name>.txt.
# It is cached: built once, rebuilt only when that file changes (its hash is in the stamp,
# which the tests compare). Adding a producer is adding a requirements file.
PRODUCER_REQS  := $(wildcard tests/producers/requirements-*.txt)
PRODUCER_VENVS := $(patsubst tests/producers/requirements-%.txt,$(TOOLS)/venv-%/.installed,$(PRODUCER_REQS))

.PHONY: run demo test lint typecheck unit docs reference bench soak clean producer-venvs

CONFIG ?=
# SIGTERM or Ctrl-C reach the daemon through the trap; it drains and stops, and a stop by
# signal is the recipe's success, so make says nothing of a "*** Terminated" failure.
run: $(VENV)/.installed ## install, then start the daemon (CONFIG=file.yaml; default ./sidewatch.db on 127.0.0.1:9477)
	@$(BIN)/sidewatch serve $(if $(CONFIG),--config $(CONFIG)) & pid=$$!; \
	trap 'kill -TERM $$pid 2>/dev/null' TERM INT; \
	wait $$pid; status=$$?; while kill -0 $$pid 2>/dev/null; do wait $$pid; status=$$?; done; \
	case $$status in 130|143) exit 0;; *) exit $$status;; esac

demo: $(VENV)/.installed ## print the reference six-request audit
	$(BIN)/sidewatch demo

test: $(VENV)/.installed-test $(PROMTOOL) $(ALERTMANAGER) $(PGBOUNCER) $(CHROMIUM) producer-venvs \
	$(TOOLS)/node-mastra/.installed \
	lint typecheck docs unit ## everything CI runs

lint: $(VENV)/.installed-test
	$(BIN)/ruff check sidewatch tap tests bench
	$(BIN)/ruff format --check sidewatch tap tests bench

typecheck: $(VENV)/.installed-test
	$(BIN)/mypy

unit: $(VENV)/.installed-test
	$(BIN)/pytest

# The docs site (mkdocs.yml, docs/): any warning (a broken link, a page left out of the nav)
# fails the build. tests/test_docs.py fails when a generated reference page is stale.
docs: $(VENV)/.installed-test ## build the docs site into site/ (mkdocs --strict)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

reference: $(VENV)/.installed-test ## write docs/reference/*.md again from the code
	$(PY) -m sidewatch.cli.docsgen docs/reference

bench: $(VENV)/.installed-test ## speed figures, each beside its floor measured in the same run
	$(PY) bench/ingest.py
	$(PY) bench/file_ingest.py
	$(PY) bench/http_ingest.py --replicas 3
	$(PY) bench/audit.py --pg
	$(PY) bench/report.py
	$(PY) bench/engine.py
	$(PY) bench/engine_targets.py --runs 10000
	$(PY) bench/ui.py
	$(PY) bench/limits.py
	$(PY) bench/lists.py
	$(PY) bench/reaudit.py

soak: $(VENV)/.installed-test ## ten minutes of mixed load with faults: counts agree, memory flat
	$(PY) bench/soak.py

.PHONY: report-screenshot
report-screenshot: $(VENV)/.installed $(CHROMIUM) ## the reference report as HTML, and a screenshot of it
	mkdir -p reports
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(BIN)/sidewatch ingest --db "sqlite:///$$tmp/example.db" sidewatch/cli/seed-audit.ndjson && \
	$(BIN)/sidewatch report --db "sqlite:///$$tmp/example.db" --at 2026-07-26T16:30:00Z \
		--window 24h --format html --output $(EXAMPLE).html && \
	$(CHROMIUM) $(CHROMIUM_FLAGS) --user-data-dir="$$tmp/profile" --window-size=1280,2000 \
		--screenshot=$(abspath $(EXAMPLE).png) file://$(abspath $(EXAMPLE).html)
	test -s $(EXAMPLE).png

# The wait list, a wait's page and the HTML report of the reference audit (shifted to now),
# served by a real daemon and shot in headless Chromium into docs/images (README and docs).
.PHONY: ui-screenshots
ui-screenshots: $(VENV)/.installed-test $(CHROMIUM) ## screenshots of the wait pages and the report
	$(PY) -m tests.daemon.ui_screenshots docs/images
	test -s docs/images/ui-waits.png && test -s docs/images/ui-wait.png && test -s docs/images/ui-report.png

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# setuptools' notice on every editable install (a reminder that folders named like the package
# may shadow it) says nothing to act on here: the install stays quiet, as `make run` should be.
QUIET_EDITABLE := PYTHONWARNINGS="ignore:Editable installation"

$(VENV)/.installed: pyproject.toml | $(PY)
	$(QUIET_EDITABLE) $(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(QUIET_EDITABLE) $(PY) -m pip install -q -e '.[test,postgres,nats,otel]'
	touch $@ $(VENV)/.installed

producer-venvs: $(PRODUCER_VENVS) ## the producers' own virtual environments (tests/producers)

$(TOOLS)/venv-%/.installed: tests/producers/requirements-%.txt
	rm -rf $(TOOLS)/venv-$*
	$(PYTHON) -m venv $(TOOLS)/venv-$*
	$(TOOLS)/venv-$*/bin/python -m pip install -q --upgrade pip
	$(TOOLS)/venv-$*/bin/python -m pip install -q -r $<
	sha256sum $< | cut -d' ' -f1 > $@

# @ag-ui/mastra on @mastra/core (TypeScript), for tests/producers/mastra/capture.mjs, run by the
# machine's Node.js: npm ci of the checked-in lock file in .tools/node-mastra, cached like the
# producer venvs (rebuilt only when the lock file changes; its hash is in the stamp).
MASTRA := tests/producers/mastra
$(TOOLS)/node-mastra/.installed: $(MASTRA)/package-lock.json $(MASTRA)/package.json $(MASTRA)/.npmrc
	rm -rf $(TOOLS)/node-mastra
	mkdir -p $(TOOLS)/node-mastra
	cp $(MASTRA)/package.json $(MASTRA)/package-lock.json $(MASTRA)/.npmrc $(TOOLS)/node-mastra/
	cd $(TOOLS)/node-mastra && npm ci --no-audit --no-fund --loglevel=error
	sha256sum $< | cut -d' ' -f1 > $@

# promtool (and a real Prometheus) from Debian's package, unpacked without starting a service.
$(PROMTOOL):
	mkdir -p $(TOOLS)/debs
	cd $(TOOLS)/debs && (apt-get download prometheus 2>/dev/null || \
		(apt-get update -qq && apt-get download prometheus))
	dpkg -x $(TOOLS)/debs/prometheus_*.deb $(TOOLS)/prometheus
	rm -rf $(TOOLS)/debs
	$(PROMTOOL) --version | head -1

# headless Chromium from Debian's package, for tests/report and `make report-screenshot`
$(CHROMIUM):
	apt-get update -qq && apt-get install -y -qq chromium

# a real Alertmanager from Debian's package, for the push tests
$(ALERTMANAGER):
	mkdir -p $(TOOLS)/debs-am
	cd $(TOOLS)/debs-am && (apt-get download prometheus-alertmanager 2>/dev/null || \
		(apt-get update -qq && apt-get download prometheus-alertmanager))
	dpkg -x $(TOOLS)/debs-am/prometheus-alertmanager_*.deb $(TOOLS)/alertmanager
	rm -rf $(TOOLS)/debs-am
	# Debian's build reads its default template from this fixed path (the package puts it there)
	test -f /usr/share/prometheus/alertmanager/default.tmpl || \
		cp -r $(TOOLS)/alertmanager/usr/share/prometheus /usr/share/
	$(ALERTMANAGER) --version 2>&1 | head -1

# PgBouncer from Debian's package (and the c-ares library it links), unpacked without
# starting a service: the tests start it on their own port in front of the running PostgreSQL.
$(PGBOUNCER):
	mkdir -p $(TOOLS)/debs-pgb
	cd $(TOOLS)/debs-pgb && (apt-get download pgbouncer libc-ares2 2>/dev/null || \
		(apt-get update -qq && apt-get download pgbouncer libc-ares2))
	for deb in $(TOOLS)/debs-pgb/*.deb; do dpkg -x $$deb $(TOOLS)/pgbouncer; done
	rm -rf $(TOOLS)/debs-pgb
	LD_LIBRARY_PATH=$(abspath $(TOOLS)/pgbouncer/usr/lib/x86_64-linux-gnu) $(PGBOUNCER) --version | head -1

clean:
	rm -rf $(VENV) $(TOOLS) site .mypy_cache .pytest_cache .ruff_cache sidewatch.egg-info
