# The two commands of the README.  Both create .venv on first use.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test,tune,rpc]"
	$(PY) -m pip install -q "torch==2.13.0" || echo "torch==2.13.0 not available: PyTorch interop tests will be skipped"
	touch $(STAMP)

# Compile and run the Elman RNN example on random inputs and check it against NumPy.
run: $(STAMP)
	$(PY) examples/rnn/run.py elman

# The test suite (no GPU needed; CUDA tests are skipped without one).
test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadgroup --durations=25 tests

# CPU benchmarks against PyTorch and NumPy (see benchmarks/README.md).
bench: $(STAMP)
	$(PY) -m pip install -q -e ".[bench]"
	$(PY) benchmarks/rnn.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
