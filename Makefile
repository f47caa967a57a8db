# Two commands on a fresh machine (Python 3.11, pip, a C compiler): `make run` and `make test`.
# Both create or refresh .venv from pyproject.toml first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The console's browser tests drive Debian's Chromium (Playwright cannot download a browser
# here); `make test` installs it when it is missing.
CHROMIUM ?= /usr/bin/chromium
# The reverse-proxy tests run deploy/nginx/herald.conf in Debian's nginx (openssl makes their
# certificate); `make test` installs both when nginx is missing.
NGINX ?= /usr/sbin/nginx
# The egress-proxy tests send through Debian's tinyproxy; `make test` installs it when missing.
TINYPROXY ?= /usr/bin/tinyproxy
# The browser tests check pages with axe-core, from npm at the version its lockfile pins.
AXE := tests/browser/axe/node_modules/axe-core/axe.min.js
# The TypeScript client's build and test tools, from npm at the versions its lockfile pins.
TS_TOOLS := clients/typescript/node_modules/.bin/tsc

# The release's version, written once: app/__init__.py (`make -s version` prints it).
VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"$$/\1/p' app/__init__.py)
# Where `make dist` writes what a release publishes.
DIST ?= dist
# The image `make image` builds, tagged with the version: IMAGE=registry.example.com/herald
# names it for your registry.
IMAGE ?= herald

.PHONY: run test lint typecheck pytest openapi docs bench bench-quick clean lock dist chart image \
	version release-notes

# Installed from the lockfile: every machine gets the same versions. Herald itself on top,
# editable, without resolving anything again.
$(STAMP): pyproject.toml requirements.lock clients/python/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps -e . -e clients/python
	touch $(STAMP)

# Re-resolve pyproject.toml's dependencies (dev and embedded extras included) into
# requirements.lock, in a scratch venv so that nothing installed by hand slips in.
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/python -m pip install --quiet --upgrade pip
	.lock-venv/bin/python -m pip install --quiet '.[dev,embedded]'
	{ sed -n '1,3p' requirements.lock; \
	  .lock-venv/bin/python -m pip freeze --exclude-editable | grep -v -E '^herald-webhooks( @|==)'; \
	} > requirements.lock.new
	mv requirements.lock.new requirements.lock && rm -rf .lock-venv

run: $(STAMP)
	$(BIN)/herald-dev

test: $(STAMP) lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/actionlint

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP) $(CHROMIUM) $(NGINX) $(TINYPROXY) $(SYSTEM_REDIS) $(AXE) $(TS_TOOLS)
	HERALD_CHROMIUM=$(CHROMIUM) HERALD_NGINX=$(NGINX) HERALD_TINYPROXY=$(TINYPROXY) \
	  HERALD_REDIS_SERVER=$(SYSTEM_REDIS) $(BIN)/pytest

$(AXE): tests/browser/axe/package.json tests/browser/axe/package-lock.json
	npm ci --prefix tests/browser/axe --no-audit --no-fund
	touch $(AXE)

$(TS_TOOLS): clients/typescript/package.json clients/typescript/package-lock.json
	npm ci --prefix clients/typescript --no-audit --no-fund
	touch $(TS_TOOLS)

# Installed once, as root or through sudo, when it is missing.
$(CHROMIUM):
	$$(test "$$(id -u)" = 0 || echo sudo) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $$(test "$$(id -u)" = 0 || echo sudo) \
	  apt-get install -y -qq chromium

$(NGINX):
	$$(test "$$(id -u)" = 0 || echo sudo) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $$(test "$$(id -u)" = 0 || echo sudo) \
	  apt-get install -y -qq nginx openssl

$(TINYPROXY):
	$$(test "$$(id -u)" = 0 || echo sudo) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $$(test "$$(id -u)" = 0 || echo sudo) \
	  apt-get install -y -qq tinyproxy

# make bench runs Herald the way users do, on Debian's PostgreSQL and Redis as servers over TCP;
# the tests make a Redis Cluster of Debian's redis-server and redis-cli. Each is installed once
# when missing.
SYSTEM_POSTGRES ?= /usr/lib/postgresql/15/bin/postgres
SYSTEM_REDIS ?= /usr/bin/redis-server

$(SYSTEM_POSTGRES):
	$$(test "$$(id -u)" = 0 || echo sudo) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $$(test "$$(id -u)" = 0 || echo sudo) \
	  apt-get install -y -qq postgresql-15

$(SYSTEM_REDIS):
	$$(test "$$(id -u)" = 0 || echo sudo) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $$(test "$$(id -u)" = 0 || echo sudo) \
	  apt-get install -y -qq redis-server

# BENCH_ARGS takes bench/run.py's options, e.g. BENCH_ARGS="--workers 1" (one worker of
# concurrency 200) or "--only e2e".
BENCH_ARGS ?=

bench: $(STAMP) $(SYSTEM_POSTGRES) $(SYSTEM_REDIS)
	$(BIN)/python bench/run.py $(BENCH_ARGS)
	$(BIN)/python bench/idle_latency.py --beside-paused 10000

bench-quick: $(STAMP) $(SYSTEM_POSTGRES) $(SYSTEM_REDIS)
	$(BIN)/python bench/run.py --quick $(BENCH_ARGS)
	$(BIN)/python bench/idle_latency.py --count 50 --beside-paused 2000

openapi: $(STAMP)
	$(BIN)/herald openapi > openapi/openapi.json

# docs/configuration.md, written from Settings; a test fails when it is out of date.
docs: $(STAMP)
	$(BIN)/python -m devstack.settings_doc

version:
	@echo $(VERSION)

# What a release publishes, into $(DIST): the server's and the Python client's sdist and
# wheel (PyPA's build makes each wheel from its sdist, so an sdist missing a file fails here),
# the TypeScript client's npm tarball (npm runs its `prepare`: both builds) and the chart.
dist: $(STAMP) $(TS_TOOLS) chart
	$(BIN)/python -m build --outdir $(DIST) .
	$(BIN)/python -m build --outdir $(DIST) clients/python
	cd clients/typescript && npm pack --pack-destination $(abspath $(DIST))

# The chart's package, herald-<version>.tgz, made by Helm's own code (helm-python-sdk, the
# engine the chart's tests render with): no helm binary needed.
chart: $(STAMP)
	mkdir -p $(DIST)
	$(BIN)/python -c 'import sys; from helm_python import package; print(package(sys.argv[1], destination=sys.argv[2]))' \
	  deploy/helm/herald $(DIST)

# The production image, tagged with the version.
image:
	docker build -t $(IMAGE):$(VERSION) .

# This version's section of CHANGELOG.md (a GitHub release's text): the lines under its
# heading, up to the next release's or the link definitions.
release-notes:
	@awk '/^## \[/ { if (mine) exit; mine = index($$0, "## [$(VERSION)]") == 1; next } \
	  /^\[[^]]+\]: / { if (mine) exit } mine' CHANGELOG.md

clean:
	rm -rf $(VENV) .herald .mypy_cache .pytest_cache .ruff_cache dist
