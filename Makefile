# The two commands of the README: `make demo` and `make test`. Each creates (or reuses) the
# virtual environment in .venv and installs what it needs first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: all demo test test-stress lint format types bench clean

all: lint types test

$(STAMP): pyproject.toml examples/wbsync-deductions/pyproject.toml examples/wbsync-supplies/pyproject.toml examples/wbsync-nmreport/pyproject.toml benchmarks/pyproject.toml
	@sh scripts/venv.sh "$(PYTHON)" "$(VENV)"
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev,embedded,dlt]'
	# The example plugins, so the suite runs them end to end as installed packages.
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps -e examples/wbsync-deductions
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps -e examples/wbsync-supplies
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps -e examples/wbsync-nmreport
	# The benchmarks (`wbsync bench`, tests/bench), with the libraries only they use.
	$(BIN)/python -m pip install -q --disable-pip-version-check -e benchmarks
	@rm -f $(VENV)/.installed-* && touch $@

demo: $(STAMP)
	$(BIN)/wbsync demo

# The suite in TEST_WORKERS processes (pytest-xdist); TEST_WORKERS=0 runs it in this one. Its
# tests spend most of their time waiting on Redis, databases and child processes, so four
# processes fill two cores (docs/development.md).
TEST_WORKERS ?= 4
test: $(STAMP)
	$(BIN)/pytest -q -n $(TEST_WORKERS)

# The suite as `make test` runs it, N times in a row (default 3) beside one CPU busy loop per
# core; stops at a failure.
N ?= 3
test-stress: $(STAMP)
	$(BIN)/python scripts/stress.py --runs $(N) -- -q -n $(TEST_WORKERS)

lint: $(STAMP)
	$(BIN)/ruff check wbsync benchmarks tests examples
	$(BIN)/ruff format --check wbsync benchmarks tests examples
	$(BIN)/lint-imports

format: $(STAMP)
	$(BIN)/ruff format wbsync benchmarks tests examples
	$(BIN)/ruff check --fix wbsync benchmarks tests examples

types: $(STAMP)
	$(BIN)/mypy wbsync benchmarks/src tests examples/wbsync-deductions/src examples/wbsync-supplies/src \
		examples/wbsync-nmreport/src

bench: $(STAMP)
	$(BIN)/wbsync bench all --write-docs

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache wbsync.db
