# Shoal: every set-up step lives here, so `make run` and `make test` work on a fresh Debian machine.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEBIAN_PACKAGES := redis-server zookeeper tinyproxy docker-compose chromium postgresql maven default-jre-headless
# Apache Kafka's jars, fetched once from Maven Central (services/kafka/pom.xml) into the user's cache.
KAFKA_VERSION := 4.2.0
KAFKA_LIBS := $(or $(SHOAL_KAFKA_LIBS),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/shoal/kafka-$(KAFKA_VERSION)/libs)
PYTEST_ARGS ?=

.PHONY: run test test-fast lint typecheck bench install system-deps kafka down status clean

run: install system-deps kafka  ## start a local cluster, crawl the bundled demo site, show the pages
	$(BIN)/shoal up --services kafka,redis,zookeeper,postgres
	$(BIN)/shoal demo

test: install system-deps kafka lint typecheck  ## the whole suite: unit, integration, end-to-end
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-fast: install  ## unit tests only (no services)
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports

typecheck: install
	$(BIN)/mypy utils kafka_monitor redis_monitor crawler rest sink

bench: install system-deps kafka  ## every benchmark of bench/, results in bench/results/latest.json
	$(BIN)/python -m bench

down:
	$(BIN)/shoal down

status:
	$(BIN)/shoal status

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml examples/shop/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	$(BIN)/pip install --quiet --no-deps -e examples/shop  # the example user spider, for its tests and bench
	touch $@

# Debian's packages, installed without starting their system services (policy-rc.d), so the
# default ports stay free for the node `shoal up` starts.
system-deps:
	@missing=""; for p in $(DEBIAN_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
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

clean:
	rm -rf $(VENV) .shoal .mypy_cache .ruff_cache *.egg-info
