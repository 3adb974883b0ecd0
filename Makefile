# trainyard: the two set-up commands are `make up` and `make test`.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
TRAINYARD := $(BIN)/trainyard
# Every source file: the strict editable install links files, so a new file needs a reinstall.
SOURCES := $(shell find src platform controller runtimes queues -type f \( -name '*.py' -o -name '*.yaml' -o -name '*.j2' -o -name '*.json' \) 2>/dev/null) pyproject.toml

.PHONY: help dev tools up down test unit status clean bench

help:
	@echo "make up     start the local GPU cluster with its controllers and deploy the local stack"
	@echo "make test   run the whole test suite (builds missing tools first)"
	@echo "make down   stop everything make up started"
	@echo "make bench  rerun the benchmarks under 15 min a run and regenerate the docs' figures (NAME=<bench>: one)"

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip setuptools wheel

$(VENV)/.installed: $(BIN)/python $(SOURCES)
	$(BIN)/pip install -q -e '.[test,pulumi]' --config-settings editable_mode=strict
	@touch $@

dev: $(VENV)/.installed

tools: dev
	$(TRAINYARD) tools build

up: dev
	$(TRAINYARD) tools build --group core
	$(TRAINYARD) up

down: dev
	$(TRAINYARD) down

status: dev
	$(TRAINYARD) cluster status

unit: dev
	$(TRAINYARD) tools build kubeflow-trainer
	$(BIN)/pytest -q tests/unit

test: tools
	$(BIN)/pytest -q

# `make bench` reruns every bench that is not long; `make bench NAME=scale` one (see `trainyard bench list`).
# The docs are regenerated even when a target was missed (the page says so); make then fails with the bench's code.
bench: tools
	$(TRAINYARD) bench run $(if $(NAME),$(NAME),--all); status=$$?; $(TRAINYARD) bench docs && exit $$status

clean:
	rm -rf $(VENV) build *.egg-info
