# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev,bench,local-llm]"
	touch $(STAMP)

# The main job: today the network game with a mixed society (rule, learned and a few LLM
# agents on the embedded local model); the flagship scenario replaces it when it lands.
demo: $(STAMP)
	$(BIN)/society run network-game --seed 1 --set agents=200 --set agent_type=mixed \
		--set split=rules:90,learned:8,llm:2 --set strategies=allc:1,alld:1,tft:1 --set steps=8

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_engine.py

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
