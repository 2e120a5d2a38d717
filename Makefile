# Everything runs inside .venv, created on first use, so a fresh machine needs only python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-all fuzz bench clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/tvms fmt examples/matmul.tvms
	$(BIN)/tvms fmt --dialect tvm-0.27 examples/matmul.tvms
	$(BIN)/tvms opt --pipeline zero --timing examples/mlp.tvms
	$(BIN)/tvms run examples/mlp.tvms --entry forward --random-inputs --shape n=4 --time

# `test` draws the same Hypothesis examples every run (profile ci, tests/conftest.py); `test-all`
# and `fuzz` draw fresh ones. The tests run on one worker process a core (pytest-xdist), at most
# 8 (each holds a few hundred MB); TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= auto
XDIST := -n $(TEST_WORKERS) --maxprocesses=8
test: $(STAMP)
	$(BIN)/python -m pytest tests -q --hypothesis-profile=ci $(XDIST)

test-all: $(STAMP)
	$(BIN)/python -m pytest tests -q --runslow --hypothesis-profile=fuzz $(XDIST)

FUZZ_INPUTS ?= 20000
fuzz: $(STAMP)
	$(BIN)/python -m pytest tests -q -m hypothesis --hypothesis-profile=fuzz
	$(BIN)/python benchmarks/fuzz.py --inputs $(FUZZ_INPUTS) --jobs 2 --out fuzz-escapes

bench: $(STAMP)
	$(BIN)/python benchmarks/parse_print.py
	$(BIN)/python benchmarks/cpu_e2e.py
	$(BIN)/python benchmarks/matmul_cpu.py
	$(BIN)/python benchmarks/cpu_default.py

clean:
	rm -rf $(VENV) build *.egg-info
