# One entry point for people and CI. `make test` and `make demo` work on a fresh machine with only
# python3 (3.11) and PyPI: they bootstrap uv into .tools/ and the locked environment into .venv/.
PYTHON ?= python3
TOOLS := .tools
UV := $(TOOLS)/bin/uv
VENV := .venv
BIN := $(VENV)/bin

# Bytecode compiled at install time: this machine sets PYTHONDONTWRITEBYTECODE, and without .pyc files
# Airflow imports (and the test suite) run about 3x slower. Never let uv fetch its own Python.
export UV_COMPILE_BYTECODE := 1
export UV_PYTHON_DOWNLOADS := never
export UV_PROJECT_ENVIRONMENT := $(VENV)
# LOADTEST_NO_SYSTEM_INSTALLS=1 (from the environment or `make test LOADTEST_NO_SYSTEM_INSTALLS=1`): the
# suite installs nothing system-wide and skips the checks that need it (tests/system_installs.py).
export LOADTEST_NO_SYSTEM_INSTALLS

# The declared floor (pyproject: apache-airflow>=3.1.0), installed as it was on its release day: Airflow's
# constraint files cannot be fetched here, so every dependency is pinned by date instead.
FLOOR_AIRFLOW := 3.1.0
FLOOR_DATE := 2025-09-26T00:00:00Z
FLOOR_VENV := .venv-floor
# The unit tests' own needs (the dev group minus the linters and the mutation tool), and wtforms, which
# Airflow 3.1's UI needs to draw a provider's connection form (the FAB provider brings it in a real
# deployment). aioresponses as it was then (0.7.8, for that day's aiohttp 3.12): the dev group's
# aioresponses-ng, the same module for aiohttp 3.13+, did not exist yet. hypothesis for the view's property tests.
FLOOR_TEST_DEPS := pytest pytest-xdist pytest-timeout requests-mock aioresponses hypothesis pypdf wtforms

.PHONY: venv venv-floor otava-venv lint docs dist wheel-floor announce-system-installs test unit unit-floor demo demo-ui bench browser chaos test-prod test-prod-slice mutation clean

$(UV):
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install --quiet --disable-pip-version-check uv==0.13.8

# Quiet: the package list would bury the demo's own lines (errors still show); one line says what it did.
venv: $(UV)
	$(UV) sync --locked --quiet --python $(PYTHON)
	@echo "[venv] $(VENV) matches uv.lock ($$(ls $(VENV)/lib/python3*/site-packages | grep -c dist-info) packages)"

# Rebuilt when the project's dependencies or this recipe change (about 10 s).
$(FLOOR_VENV)/.built: pyproject.toml Makefile | $(UV)
	rm -rf $(FLOOR_VENV)
	$(UV) venv --quiet --python $(PYTHON) $(FLOOR_VENV)
	VIRTUAL_ENV=$(FLOOR_VENV) $(UV) pip install --quiet --exclude-newer $(FLOOR_DATE) \
		apache-airflow==$(FLOOR_AIRFLOW) $(FLOOR_TEST_DEPS) -e .
	touch $@

venv-floor: $(FLOOR_VENV)/.built

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The documentation, warnings as errors, into build/docs/ (gitignored; open build/docs/index.html):
# docs/*.md as they are, and the reference generated from the docstrings and signatures
# (devtools/docs_reference.py lists the modules). About 2 s; the toolchain is the `docs` group.
docs: venv
	$(BIN)/python -m mkdocs build --strict
	@echo "docs built: build/docs/index.html"

# What the suite installs outside the repository, said before it happens: the browser check
# (tests/integration/test_browser_check.py -> devtools/browser_check.py) apt-installs Debian's chromium
# when it is missing and this is root with apt-get; otherwise that one test is skipped.
define ANNOUNCE_CHROMIUM
	@if [ ! -x /usr/bin/chromium ]; then \
		if [ "$(LOADTEST_NO_SYSTEM_INSTALLS)" = 1 ]; then \
			echo "NOTE: chromium is missing and LOADTEST_NO_SYSTEM_INSTALLS=1: nothing is installed system-wide," \
				"the real-browser check will be skipped (a failure under CI=true)."; \
		elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "NOTE: make $(MAKECMDGOALS) will install Debian's chromium SYSTEM-WIDE (apt-get update && apt-get install -y chromium," \
				"about 150 MB to download, up to 500 MB on disk) for the real-browser check of the connection form" \
				"(devtools/browser_check.py). It stays installed afterwards (apt-get remove chromium removes it);" \
				"LOADTEST_NO_SYSTEM_INSTALLS=1 installs nothing and skips that check."; \
		else \
			echo "NOTE: chromium is missing and cannot be installed here (needs apt-get as root):" \
				"the real-browser check will be skipped."; \
		fi; \
	fi
endef

# The production rig's slice (tests/production) needs Debian's PostgreSQL and Redis: installed the same
# way (root and apt-get), or the slice is skipped with the reason.
define ANNOUNCE_PROD_PACKAGES
	@missing=""; \
	ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || command -v pg_ctl >/dev/null 2>&1 || missing=" postgresql"; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	if [ -n "$$missing" ]; then \
		if [ "$(LOADTEST_NO_SYSTEM_INSTALLS)" = 1 ]; then \
			echo "NOTE:$$missing missing and LOADTEST_NO_SYSTEM_INSTALLS=1: nothing is installed system-wide," \
				"the production slice will be skipped (a failure under CI=true)."; \
		elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "NOTE: make $(MAKECMDGOALS) will install Debian's$$missing SYSTEM-WIDE (apt-get install -y --no-install-recommends," \
				"about 60 MB on disk) for the production rig's slice (tests/production runs throwaway instances on 127.0.0.1)." \
				"They stay installed; on a systemd host apt-get also starts and enables their own services (:5432, :6379)." \
				"LOADTEST_NO_SYSTEM_INSTALLS=1 installs nothing and skips the slice and the browser check."; \
		else \
			echo "NOTE:$$missing missing and cannot be installed here (needs apt-get as root): the production slice will be skipped."; \
		fi; \
	fi
endef

# First, before anything else runs (make builds prerequisites left to right).
announce-system-installs:
	$(ANNOUNCE_CHROMIUM)
	$(ANNOUNCE_PROD_PACKAGES)

# The whole suite: lint, type check, the docs, unit and integration tests (real simulator, real Airflow)
# on the locked newest Airflow, the unit tests again on the oldest Airflow we declare, the built wheel
# installed with that Airflow and the quickstart run against it, then the production
# rig's slice (PostgreSQL, Celery, two triggerers). pytest-xdist runs the files in PYTEST_WORKERS
# processes, each test file whole in one of them (a file's Airflow cluster is module-scoped): the
# real-Airflow cases mostly wait on runs and processes, so 2 workers halve the time on 2 cores.
PYTEST_WORKERS ?= 2
PYTEST_PARALLEL := -n $(PYTEST_WORKERS) --dist loadfile
test: announce-system-installs lint docs
	$(BIN)/python -m pytest -m "not production" $(PYTEST_PARALLEL)
	$(MAKE) unit-floor
	$(MAKE) wheel-floor
	$(MAKE) test-prod-slice

unit: venv
	$(BIN)/python -m pytest tests/unit

# The package as it would be published, into dist/: the sdist and the wheel (uv build, hatchling), their
# metadata checked by twine (run by uv in a throwaway environment: never a dependency of ours), then what
# the wheel holds (devtools/check_dist.py: every tracked file of the package, no tests/, devtools/,
# benchmarks/). About 10 s.
TWINE_VERSION := 7.0.0
dist: $(UV)
	rm -rf dist
	$(UV) build --quiet --sdist --wheel --out-dir dist
	$(UV) tool run --quiet --from twine==$(TWINE_VERSION) twine check --strict dist/*
	$(PYTHON) devtools/check_dist.py dist

# The built wheel (not the tree) in a fresh venv with the oldest Airflow we declare, pinned by date as
# venv-floor is (uv's cache makes it about 20 s), then the README's quickstart against it from a
# temporary folder, so the source tree cannot shadow the installed package
# (tests/integration/test_readme_quickstart.py::test_the_quickstart_works_from_the_built_wheel).
WHEEL_VENV := build/wheel-floor
wheel-floor: dist venv
	rm -rf $(WHEEL_VENV)
	$(UV) venv --quiet --python $(PYTHON) $(WHEEL_VENV)
	VIRTUAL_ENV=$(WHEEL_VENV) $(UV) pip install --quiet --exclude-newer $(FLOOR_DATE) \
		apache-airflow==$(FLOOR_AIRFLOW) dist/*.whl
	LOADTEST_WHEEL_VENV=$(WHEEL_VENV) $(BIN)/python -m pytest -p no:cacheprovider \
		tests/integration/test_readme_quickstart.py -k built_wheel

unit-floor: venv-floor
	$(FLOOR_VENV)/bin/python -c "import airflow; assert airflow.__version__ == '$(FLOOR_AIRFLOW)', airflow.__version__"
	$(FLOOR_VENV)/bin/python -m pytest tests/unit -p no:cacheprovider $(PYTEST_PARALLEL)

# The main job: the example DAGs end to end in a real Airflow against the bundled simulator. Its Airflow
# home stays in ./demo-airflow (made anew by each demo) for `make demo-ui`.
demo: venv
	$(BIN)/python -m devtools.demo

# The last demo's Airflow with the "Load tests" view, signed in as admin, until Ctrl-C:
# http://127.0.0.1:8080/loadtest/ and http://127.0.0.1:8080/loadtest/dags/loadtest_release_gate
# (DEMO_UI_PORT=8081 for another port).
DEMO_UI_PORT ?= 8080
demo-ui: venv
	$(BIN)/python -m devtools.demo --serve --port $(DEMO_UI_PORT)

# The connection form in a real headless chromium (installed with apt-get when missing): see
# devtools/browser_check.py. `make test` runs it too (tests/integration/test_browser_check.py).
browser: announce-system-installs venv
	$(BIN)/python -m devtools.browser_check

# The benchmarks: each figure against a baseline measured in the same run. A full run writes its tables
# into docs/performance.md. The environment gets the `bench` dependency group on top (the peers measured
# beside us: dbt Cloud and HTTP providers); `make venv` (and so `make test`) removes it again.
# BENCH_ARGS=--smoke runs each one small (what CI runs, without the peers, so they cannot rot).
bench: $(UV) otava-venv
	$(UV) sync --locked --group bench --python $(PYTHON)
	$(BIN)/python benchmarks/run_all.py $(BENCH_ARGS)

# Apache Otava, the peer of benchmarks/gate_quality.py, in a venv of its own: it pins its own numpy and
# scipy, so it is never a dependency of the package nor of a group (benchmarks/otava_peer.py runs in it).
OTAVA_VENV := .venv-otava
OTAVA_VERSION := 0.8.0
$(OTAVA_VENV)/.built: | $(UV)
	rm -rf $(OTAVA_VENV)
	$(UV) venv --quiet --python $(PYTHON) $(OTAVA_VENV)
	VIRTUAL_ENV=$(OTAVA_VENV) $(UV) pip install --quiet apache-otava==$(OTAVA_VERSION)
	echo $(OTAVA_VERSION) > $@

otava-venv: $(OTAVA_VENV)/.built

# The chaos run of issue 10: 240 task instances (sync and deferrable, with retries) against a simulator
# with faults on every route; prints the figures and every broken rule, exits 1 if a rule broke.
chaos: venv
	$(BIN)/python -m tests.chaos.runner --task-instances 240 --seed 7

# The production-like rig of issue 17 (tests/production): PostgreSQL and Redis from Debian packages
# (apt-get installs them when missing, and says so first), throwaway instances on 127.0.0.1; Airflow with
# the CeleryExecutor, two workers, two triggerers, a DAG processor; every attack repeated, then the
# table. The environment gets the `prod` dependency group on top; `make venv` removes it again.
# PROD_ARGS="--repeat 4", "--attacks worker-sigterm,clear-sync", "--json results.json", "--keep", "--loaded"
# (a busy process per core, the triggerers' state reads held 6-20 s, as the slice runs).
test-prod: $(UV)
	$(UV) sync --locked --group prod --python $(PYTHON)
	$(BIN)/python -m tests.production $(PROD_ARGS)

# CI's slice of the rig (tests/production/test_production_slice.py, about 4.5 minutes: 264 s measured with
# its CPU hog on 2 cores shared with other jobs): a worker restart, a triggerer failover, a mark-failed, on a
# loaded machine (a busy process per core, the triggerers' task-instance state reads held 6-20 s).
# Installs the packages as `make test-prod` does where it can (root and apt-get, unless
# LOADTEST_NO_SYSTEM_INSTALLS=1); where it cannot, or apt-get fails (offline, a held lock),
# the test is skipped with the reason, and under CI=true that skip fails the run (tests/system_installs.py).
test-prod-slice: $(UV)
	$(UV) sync --locked --group prod --python $(PYTHON)
	@if [ "$(LOADTEST_NO_SYSTEM_INSTALLS)" = 1 ]; then \
		echo "NOTE: LOADTEST_NO_SYSTEM_INSTALLS=1: PostgreSQL and Redis are not installed here"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		$(BIN)/python -c "from tests.production.services import ensure_packages; ensure_packages()" || \
		echo "NOTE: PostgreSQL and Redis could not be installed (apt-get failed): the production slice will be" \
			"skipped (a failure under CI=true)"; fi
	$(BIN)/python -m pytest tests/production -m production

# Mutation testing (issue 30; not part of `make test`): mutmut changes the code one small way at a time
# (a `>` into `>=`, a condition negated, a value swapped) and runs the unit tests that reach the changed
# function; a mutant no test notices is a promise no test holds. Over the start-once code (the run
# record, the stop decisions, the operator's start path) and the gate's decisions. It runs in a copy of
# the working tree (build/mutation/, mutants under its mutants/), so the tree stays as it is. About 3,000
# mutants: hours on 2 cores (a surviving mutant runs every test that reaches its function). One module
# or function: MUTATION_ARGS='"airflow_provider_loadtest.decisions.run_record*"' (mutmut's name globs;
# a mutant that makes its tests take 3x their time counts as caught, timeout_multiplier).
# The score per module: `python -m tests.mutation_score` (printed at the end);
# `cd build/mutation && ../../.venv/bin/mutmut show NAME` shows one mutant, `mutmut browse` all.
# tests/mutation_equivalent.txt lists the survivors no test can tell from the code, and why. mutmut's
# config (setup.cfg in the copy) comes from the variables below; the packaging test that counts what a
# DAG file imports would count mutmut's own helpers, so it is left out.
MUTATION_MODULES ?= \
	airflow_provider_loadtest/decisions/run_record.py \
	airflow_provider_loadtest/decisions/stops.py \
	airflow_provider_loadtest/operators/run_scenario.py \
	airflow_provider_loadtest/decisions/gate* \
	airflow_provider_loadtest/decisions/history.py \
	airflow_provider_loadtest/decisions/verdict.py \
	airflow_provider_loadtest/decisions/transactions.py
# The unit tests of those modules (mutmut runs, for each mutant, those of them that reach its function).
# The fixed-seed gate-quality figures (test_gate_tuning.py, 4 s a run) are left out: run for each of the
# gate's mutants they would take hours; they are held to the tuning's own mutants instead (issue 30).
# Its fixed season of a confirmed regression (milliseconds) is in.
MUTATION_TESTS ?= \
	tests/unit/test_run_lifecycle.py tests/unit/test_run_record.py tests/unit/test_stops.py \
	tests/unit/test_review_issue17.py tests/unit/test_review_issue17_held.py tests/unit/test_operator.py \
	tests/unit/test_retry_policy.py \
	tests/unit/test_gate.py tests/unit/test_gate_history.py tests/unit/test_gate_modules.py \
	tests/unit/test_gate_wiring.py tests/unit/test_transactions.py tests/unit/test_transaction_gate_wiring.py \
	tests/unit/test_gate_mutants.py tests/unit/test_gate_family.py tests/unit/test_gate_load.py \
	tests/unit/test_gate_tuning.py::test_a_confirmed_regression_keeps_failing_on_nights_the_other_tests_would_pass
MUTATION_DIR := build/mutation
MUTATION_WORKERS ?= 2
mutation: venv
	rm -rf $(MUTATION_DIR)
	mkdir -p $(MUTATION_DIR)
	git ls-files -z --cached --others --exclude-standard | \
		tar cf - --null --ignore-failed-read -T - 2>/dev/null | tar xf - -C $(MUTATION_DIR)
	cd $(MUTATION_DIR) && printf '[mutmut]\nsource_paths = airflow_provider_loadtest/\nalso_copy =\n%s\nonly_mutate =\n%s\npytest_add_cli_args_test_selection =\n%s\npytest_add_cli_args =\n    --deselect=tests/unit/test_packaging.py::test_dag_parse_imports_no_http_client_or_models\ntimeout_multiplier = 3.0\n' \
		"$$(ls | grep -v -e '^airflow_provider_loadtest$$' -e '^setup.cfg$$' | sed 's/^/    /')" \
		"$$(set -f; for m in $(MUTATION_MODULES); do printf '    %s\n' "$$m"; done)" \
		"$$(for t in $(MUTATION_TESTS); do printf '    %s\n' "$$t"; done)" \
		> setup.cfg
	cd $(MUTATION_DIR) && ../../$(BIN)/mutmut run --max-children $(MUTATION_WORKERS) $(MUTATION_ARGS)
	cd $(MUTATION_DIR) && ../../$(BIN)/python -m tests.mutation_score \
		--functions '*RunScenarioOperator*_attach_or_start*' --functions '*RunScenarioOperator*_start_recorded*'

clean:
	rm -rf $(TOOLS) $(VENV) $(FLOOR_VENV) $(OTAVA_VENV) build dist .pytest_cache .mypy_cache .ruff_cache
