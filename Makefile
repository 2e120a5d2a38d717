# Everything runs inside .venv, created on first use, so a fresh machine needs only python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-all bench clean

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

test: $(STAMP)
	$(BIN)/python -m pytest tests -q

test-all: $(STAMP)
	$(BIN)/python -m pytest tests -q --runslow

bench: $(STAMP)
	$(BIN)/python benchmarks/parse_print.py
	$(BIN)/python benchmarks/cpu_e2e.py
	$(BIN)/python benchmarks/matmul_cpu.py
	$(BIN)/python benchmarks/cpu_default.py

clean:
	rm -rf $(VENV) build *.egg-info
