# One command runner. `make test` is the README's test command: it installs what
# the tests need, then runs ruff, mypy (strict on the packages) and pytest.
PYTHON ?= python3
PYTEST_ARGS ?=

.PHONY: install lint typecheck pytest test bench clean

install:
	./scripts/install-deps.sh

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	lint-imports --config pyproject.toml

typecheck:
	$(PYTHON) -m mypy

pytest:
	$(PYTHON) -m pytest $(PYTEST_ARGS)

test: install lint typecheck pytest

bench:
	@for b in bench/*.py; do echo "== $$b"; $(PYTHON) $$b || exit 1; done

clean:
	rm -rf build dist *.egg-info .mypy_cache .ruff_cache
