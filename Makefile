# Everything runs from a private virtualenv that this Makefile creates.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo check test bytecode lint docs docs-serve bench fuzz soak up down clean migration migrate

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[embedded,postgres,gateway,otel,test,dev,docs]"
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/toolrun demo

# The edit-test loop: lint, and every test that needs no server process (no
# redis-server, celery worker, stack or PostgreSQL), on every core (CHECK_WORKERS=0: one
# process). tests/conftest.py marks the others `server` and fails this run if one of
# its tests starts such a process after all.
CHECK_WORKERS ?= auto
check: $(STAMP) bytecode
	$(BIN)/ruff check runtime workers tests docsgen
	$(BIN)/ruff format --check runtime workers tests docsgen
	$(BIN)/python -m pytest -q -m "not server" -n $(CHECK_WORKERS)

# Everything, servers included (CI's command). Three test processes on two cores
# (TEST_WORKERS=0: one): most tests wait on real workers and Redis rather than compute
# (10.7 min against 13.8 with two, on this 2-core machine), and each file's tests stay
# in one process, so a file's module-scoped stack is started once.
TEST_WORKERS ?= 3
test: $(STAMP) bytecode
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# toolrun's own modules compiled once (a changed one is compiled again). Where
# PYTHONDONTWRITEBYTECODE is set, each process the suite starts (every worker, gateway
# and `toolrun`) would otherwise compile them from source, about 0.15 s of CPU each.
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q runtime workers tests docsgen

lint: $(STAMP)
	$(BIN)/ruff check runtime workers tests docsgen
	$(BIN)/ruff format --check runtime workers tests docsgen

# The documentation site from docs/ into site/ (mkdocs.yml): the references are generated
# from the code at build time (docsgen/), and a broken link or reference fails the build.
# `make test` builds it too (tests/docs/test_site.py). `make docs-serve` serves it live.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

# toolrun against a bare Celery baseline on its own embedded stack (a few minutes);
# prints a table and writes .toolrun/bench-<timestamp>.json. Missed targets do not fail it.
bench: $(STAMP)
	$(BIN)/python -m tests.benchmarks.bench $(BENCH_FLAGS)

# The fuzz property of tests/test_fuzz.py at 10,000 examples against a real stack
# (`make test` runs 120). A found failure is saved in .hypothesis/ and replayed.
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=toolrun-fuzz $(BIN)/python -m pytest -q tests/test_fuzz.py \
		--hypothesis-show-statistics

# Batches under injected faults (worker SIGKILLs, Redis restarts, ledger cuts) for a few
# minutes; prints the figures and fails if a result went missing or a side effect ran twice.
#   make soak SOAK_FLAGS="--minutes 10"
soak: $(STAMP)
	$(BIN)/python -m tests.soak $(SOAK_FLAGS)

up: $(STAMP)
	$(BIN)/toolrun up

down: $(STAMP)
	$(BIN)/toolrun down

# The ledger's schema is Alembic's (runtime/ledger/migrations). After changing a table in
# runtime/ledger/tables.py, write the revision that brings databases along:
#   make migration m="add approvals.expires_at"
# then read the file it names; tests/ledger/test_schema.py fails until models and revisions agree.
migration: $(STAMP)
	@test -n "$(m)" || { echo 'usage: make migration m="what the revision does"'; exit 2; }
	$(BIN)/toolrun db revision -m "$(m)"

# Migrate TOOLRUN_DATABASE_URL (else the embedded SQLite) to the newest revision.
migrate: $(STAMP)
	$(BIN)/toolrun db upgrade

clean:
	rm -rf $(VENV) .toolrun .pytest_cache site
