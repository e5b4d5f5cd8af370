# Everything runs from a private virtualenv that this Makefile creates.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench up down clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[embedded,postgres,test,dev]"
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/toolrun demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check runtime workers tests
	$(BIN)/ruff format --check runtime workers tests

up: $(STAMP)
	$(BIN)/toolrun up

down: $(STAMP)
	$(BIN)/toolrun down

clean:
	rm -rf $(VENV) .toolrun .pytest_cache
