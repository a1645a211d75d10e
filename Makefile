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

.PHONY: venv lint test unit demo bench chaos clean

$(UV):
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install --quiet --disable-pip-version-check uv==0.13.8

venv: $(UV)
	$(UV) sync --locked --extra test --python $(PYTHON)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The whole suite: lint, type check, unit and integration tests (real simulator, real Airflow).
test: lint
	$(BIN)/python -m pytest

unit: venv
	$(BIN)/python -m pytest tests/unit

demo: venv
	$(BIN)/python -m devtools.demo

# The benchmarks (docs/performance.md holds one run's tables): each figure against a baseline measured in
# the same run. BENCH_ARGS=--smoke runs each one small (what CI runs, so they cannot rot).
bench: venv
	$(BIN)/python benchmarks/run_all.py $(BENCH_ARGS)

# The chaos run of issue 10: 240 task instances (sync and deferrable, with retries) against a simulator
# with faults on every route; prints the figures and every broken rule, exits 1 if a rule broke.
chaos: venv
	$(BIN)/python -m tests.chaos.runner --task-instances 240 --seed 7

clean:
	rm -rf $(TOOLS) $(VENV) .pytest_cache .mypy_cache .ruff_cache
