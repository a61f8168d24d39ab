# Shoal: every set-up step lives here, so `make run` and `make test` work on a fresh Debian machine.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEBIAN_PACKAGES := python3-venv redis-server zookeeper tinyproxy docker-compose chromium postgresql maven default-jre-headless
BENCH_DEBIAN_PACKAGES := nginx  # serves bench/crawl_vs_scrapy.py's realistic site (utils/demosite/realistic.py)
TEST_DEBIAN_PACKAGES := sudo prometheus  # sudo: tests/e2e/test_first_run.py runs `make run` unprivileged; prometheus: promtool (tests/unit/test_alert_rules.py)
# Apache Kafka's jars, fetched once from Maven Central (services/kafka/pom.xml) into the user's cache.
KAFKA_VERSION := 4.2.0
KAFKA_LIBS := $(or $(SHOAL_KAFKA_LIBS),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/shoal/kafka-$(KAFKA_VERSION)/libs)
# Helm, built once from the Go module proxy into the user's cache (a cold `go install` took 3 min 13 s
# and 1.1 GB of module and build cache here); the chart's tests (tests/unit/test_helm_chart.py) run it.
HELM_VERSION := 3.22.0
HELM := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/shoal/helm-$(HELM_VERSION)/helm
export HELM
TOXIPROXY_VERSION := 2.5.0
TOXIPROXY := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/shoal/toxiproxy-$(TOXIPROXY_VERSION)/toxiproxy-server
PYTEST_ARGS ?=
K ?=  # `make test K=redis_monitor`: only the tests pytest -k selects (with the services they start), no lint/typecheck/docs
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 2) + 1 )))  # xdist workers of the parallel phase, one more than the cores (most tests wait), each with its own services (docs/operations/tests.md)
DEMO_ARGS ?=  # e.g. --port 8282 --pages 50 (see `shoal demo --help`)

.PHONY: helm toxiproxy run test test-fast lint typecheck docs bench install install-test system-deps test-system-deps bench-system-deps debian-packages kafka down status clean

run: system-deps install kafka  ## start a local cluster, crawl the bundled demo site, show the pages
	$(BIN)/shoal up --services kafka,redis,zookeeper,postgres
	$(BIN)/shoal demo $(DEMO_ARGS)

test: system-deps test-system-deps install-test kafka helm toxiproxy $(if $(K),,lint typecheck docs)  ## the whole suite: unit, integration, end-to-end
	$(call pytest_phases,--durations=25)

test-fast: install-test helm  ## unit tests only (no services), but those marked slow (a whole pip install)
	$(call pytest_phases,tests/unit,and not slow)

# pytest in two phases, in a new random order each run (pytest-randomly prints the seed): the tests
# not marked `serial` on TEST_WORKERS workers, then the `serial` ones alone. Both phases always run;
# a phase that selects nothing (exit 5) fails only when the other selected nothing too.
# $(1): pytest's arguments; $(2): more of the marker expression ("and not slow").
PYTEST := $(BIN)/python -m pytest $(if $(K),-k "$(K)")
define pytest_phases
	@$(PYTEST) -n $(TEST_WORKERS) -m "not serial $(2)" $(1) $(PYTEST_ARGS); parallel=$$?; \
	echo "--- tests marked serial, one at a time ---"; \
	$(PYTEST) -n 0 -m "serial $(2)" $(1) $(PYTEST_ARGS); serial=$$?; \
	if [ $$parallel = 5 ] && [ $$serial = 5 ]; then exit 5; fi; \
	[ $$parallel = 0 -o $$parallel = 5 ] && [ $$serial = 0 -o $$serial = 5 ]
endef

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/lint-imports

typecheck: install-test
	$(BIN)/mypy utils kafka_monitor redis_monitor crawler rest sink revisit warc

docs: install-test  ## the documentation site into .shoal/site: every warning (a broken link or anchor) is an error
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

bench: install-test system-deps bench-system-deps kafka  ## every benchmark of bench/, results in bench/results/latest.json
	$(BIN)/python -m bench

down:
	$(BIN)/shoal down

status:
	$(BIN)/shoal status

# A venv records the directory it was made in (.venv/.installed): one made before the checkout moved
# cannot run here (its scripts and its editable install name the old path), so it is made again.
install:
	@made_in="$$(cat $(VENV)/.installed 2>/dev/null)"; \
	if [ -n "$$made_in" ] && [ "$$made_in" != "$$(pwd)" ]; then \
		echo "the checkout moved from $$made_in: making $(VENV) again"; rm -rf $(VENV); fi
	@$(MAKE) --no-print-directory $(VENV)/.installed

# pywb replays the warc component's archives in tests/e2e/test_warc_archive.py. It gets a venv of its own:
# it pins redis 2.10 and an old greenlet, which Shoal's venv cannot take (redis>=5, Playwright's greenlet).
PYWB_VERSION := 2.10.0
PYWB := .shoal/pywb

install-test: install $(VENV)/.installed-test $(PYWB)/bin/wayback

$(PYWB)/bin/wayback: $(BIN)/uv
	$(PYTHON) -m venv --clear $(PYWB)
	$(UV_INSTALL) --python $(PYWB)/bin/python 'pywb==$(PYWB_VERSION)'

# s3rver (npm), a real S3-compatible server for the warc component's S3 output (tests/integration/test_warc_s3.py),
# into services/s3rver/node_modules as its package-lock.json pins it (skipped when installed); Debian's npm if missing.
S3RVER := services/s3rver/node_modules/.bin/s3rver

install-test: $(S3RVER)

$(S3RVER): services/s3rver/package.json services/s3rver/package-lock.json
	@command -v npm >/dev/null 2>&1 || $(MAKE) --no-print-directory debian-packages PACKAGES="nodejs npm"
	cd services/s3rver && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# uv installs the venvs' packages (pip installs only uv): it fetches and unpacks in parallel and keeps
# the wheels in its cache, where pip keeps nothing from an index that sends no cache headers ('.[test]'
# into a new venv: 13.5 s cold and 10.8 s warm against pip's ~120 s). It reads no pip configuration:
# the platform's certificates (those pip is given here), and pip's index, certificate file, wheel
# directory and timeout when set in the environment, are passed on. It compiles the bytecode as pip
# does (unless PIP_NO_COMPILE): a module compiled at its first import under `-W error` (the tests)
# fails on a warning pip's install-time compile only printed, e.g. surt's invalid escapes.
UV_VERSION := 0.13.9
UV_ENV := UV_SYSTEM_CERTS=1 UV_COMPILE_BYTECODE=$(if $(PIP_NO_COMPILE),0,1) $(if $(PIP_CERT),SSL_CERT_FILE="$(or $(SSL_CERT_FILE),$(PIP_CERT))") \
	$(if $(PIP_INDEX_URL),UV_DEFAULT_INDEX="$(PIP_INDEX_URL)") $(if $(PIP_DEFAULT_TIMEOUT),UV_HTTP_TIMEOUT=$(PIP_DEFAULT_TIMEOUT)) \
	$(if $(wildcard $(PIP_FIND_LINKS)),UV_FIND_LINKS="$(PIP_FIND_LINKS)")
UV_INSTALL = $(UV_ENV) $(BIN)/uv pip install --quiet

$(BIN)/uv:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet 'uv==$(UV_VERSION)'

$(VENV)/.installed: pyproject.toml $(BIN)/uv
	$(UV_INSTALL) --python $(BIN)/python -e .
	pwd > $@

$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml examples/shop/pyproject.toml
	$(UV_INSTALL) --python $(BIN)/python -e '.[test]'
	$(UV_INSTALL) --python $(BIN)/python --no-deps -e examples/shop  # the example user spider, for its tests and bench
	touch $@

# Debian's packages, installed without starting their system services (policy-rc.d), so the
# default ports stay free for the node `shoal up` starts.
# Without apt-get (not Debian) or without root and sudo, one line says what to do.
system-deps:
	@$(MAKE) --no-print-directory debian-packages PACKAGES="$(DEBIAN_PACKAGES)"

test-system-deps:
	@$(MAKE) --no-print-directory debian-packages PACKAGES="$(TEST_DEBIAN_PACKAGES)"

bench-system-deps:
	@$(MAKE) --no-print-directory debian-packages PACKAGES="$(BENCH_DEBIAN_PACKAGES)"

debian-packages:
	@missing=""; for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ] && ! command -v apt-get >/dev/null 2>&1; then \
		echo "Shoal needs Debian's packages$$missing (no apt-get here: install their equivalents, then run make again)"; exit 1; fi; \
	if [ -n "$$missing" ] && [ -n "$(SUDO)" ] && ! command -v sudo >/dev/null 2>&1; then \
		echo "Shoal needs Debian's packages$$missing: as root run 'apt-get install -y$$missing' (or install sudo), then run make again"; exit 1; fi; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		$(SUDO) apt-get update -qq; \
		created=""; if [ ! -e /usr/sbin/policy-rc.d ]; then \
			printf '#!/bin/sh\nexit 101\n' | $(SUDO) tee /usr/sbin/policy-rc.d >/dev/null; \
			$(SUDO) chmod +x /usr/sbin/policy-rc.d; created=1; fi; \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; status=$$?; \
		[ -n "$$created" ] && $(SUDO) rm -f /usr/sbin/policy-rc.d; \
		exit $$status; \
	fi

kafka: system-deps  ## Apache Kafka's broker jars (skipped when cached)
	@test -f $(KAFKA_LIBS)/kafka_2.13-$(KAFKA_VERSION).jar || { \
		echo "fetching Apache Kafka $(KAFKA_VERSION) into $(KAFKA_LIBS)"; \
		mvn -q -B -f services/kafka/pom.xml -Dkafka.version=$(KAFKA_VERSION) \
			dependency:copy-dependencies -DoutputDirectory=$(KAFKA_LIBS).partial && \
		rm -rf $(KAFKA_LIBS) && mv $(KAFKA_LIBS).partial $(KAFKA_LIBS); }

# Go itself is a module of the Go module proxy (golang.org/toolchain): fetched into the cache when the
# machine has no go of its own (Debian 12's golang-go, 1.19, is too old to build helm 3.22).
GO_TOOLCHAIN := v0.0.1-go1.24.4.linux-amd64
GO_CACHE := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/shoal/go-$(GO_TOOLCHAIN)
# GO_FOR_BUILD sets $$go to a go of 1.21 or later: the machine's own, else the toolchain module above.
GO_FOR_BUILD = go=$$(command -v go); \
		case "$$($${go:-false} version 2>/dev/null)" in *go1.2[1-9]*|*go1.[3-9][0-9]*) ;; *) \
			test -x $(GO_CACHE)/bin/go || { mkdir -p $(GO_CACHE) && \
				python3 -c "import io,sys,urllib.request,zipfile; zipfile.ZipFile(io.BytesIO(urllib.request.urlopen(sys.argv[1]).read())).extractall(sys.argv[2])" \
					https://proxy.golang.org/golang.org/toolchain/@v/$(GO_TOOLCHAIN).zip $(GO_CACHE).zip.d && \
				mv $(GO_CACHE).zip.d/golang.org/toolchain@$(GO_TOOLCHAIN)/* $(GO_CACHE)/ && chmod +x $(GO_CACHE)/bin/* $(GO_CACHE)/pkg/tool/*/* && \
				rm -rf $(GO_CACHE).zip.d; }; \
			go=$(GO_CACHE)/bin/go;; esac

# The build (about 3 minutes cold) runs in the background while the suite starts: only
# tests/unit/test_helm_chart.py needs it, and it waits for $(HELM) (or $(HELM).failed and the log).
helm:  ## helm for the chart's tests (built once in the background; skipped when cached)
	@test -x $(HELM) || { \
		$(GO_FOR_BUILD); \
		mkdir -p $(dir $(HELM)); rm -f $(HELM).failed; \
		echo "building helm $(HELM_VERSION) into $(dir $(HELM)) with $$go, in the background (log: $(HELM).log)"; \
		( GOTOOLCHAIN=auto GOBIN=$(dir $(HELM))partial $$go install helm.sh/helm/v3/cmd/helm@v$(HELM_VERSION) \
			&& mv $(dir $(HELM))partial/helm $(HELM) || touch $(HELM).failed ) >$(HELM).log 2>&1 </dev/null & }

# Toxiproxy, the fault injector between components and services in tests/e2e/test_wire_faults.py,
# built in the foreground (the fault suite needs it from its first test) into the user's cache.
toxiproxy:  ## toxiproxy-server for the network fault tests (built once; skipped when cached)
	@test -x $(TOXIPROXY) || { \
		$(GO_FOR_BUILD); \
		mkdir -p $(dir $(TOXIPROXY)); \
		echo "building toxiproxy $(TOXIPROXY_VERSION) into $(dir $(TOXIPROXY)) with $$go"; \
		GOTOOLCHAIN=auto GOBIN=$(dir $(TOXIPROXY))partial $$go install github.com/Shopify/toxiproxy/v2/cmd/server@v$(TOXIPROXY_VERSION) \
			</dev/null && mv $(dir $(TOXIPROXY))partial/server $(TOXIPROXY); }

clean:
	rm -rf $(VENV) .shoal .mypy_cache .ruff_cache *.egg-info
