# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean lock

# What .venv gets is requirements.lock: exact versions and the sha256 of every file of each
# release (uv's universal resolution: any platform, Python >= 3.11) of the project's
# dependencies, its extras below, pip and setuptools. `make lock` regenerates it after a change
# to pyproject.toml's dependencies; set-up refuses a lock older than them (DEPS_HASH).
LOCKED_EXTRAS := dev bench local-llm ray
UV_VERSION := 0.13.8
# pytest-xdist workers for `make test` (auto: one per core); each test file stays on one worker,
# so a file's fixtures are built once. `make test TEST_WORKERS=0` runs in one process. A crashed
# worker is not replaced: its test fails once, named, and the rest finish on the others.
TEST_WORKERS ?= auto
DEPS_HASH = $(PYTHON) -c 'import hashlib, json, tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; \
	d = [p.get("requires-python"), p["dependencies"]] + [p["optional-dependencies"][e] for e in "$(LOCKED_EXTRAS)".split()]; \
	print(hashlib.sha256(json.dumps(d).encode()).hexdigest()[:16])'

# Debian's Chromium is installed first (scripts/install_browser.sh) for the dashboard's browser test.
# llama.cpp (the local model's server) is built first, by scripts/build_llama.sh: portable
# flags (no -march=native, AMX or AVX-512), the wheel cached per set of flags, built from the
# sdist whose hash the lock records. The lock install then finds llama-cpp-python installed
# (pip trusts an installed requirement) and --only-binary stops it from ever building it with
# its native defaults. The project itself goes in last, editable, with no dependencies of its
# own fetched and the locked setuptools; `pip check` proves the result consistent.
$(STAMP): pyproject.toml requirements.lock scripts/build_llama.sh scripts/install_browser.sh
	@test "$$(sed -n 's/^# dependencies sha256: //p' requirements.lock)" = "$$($(DEPS_HASH))" || \
		{ echo "requirements.lock is older than pyproject.toml's dependencies: run make lock" >&2; exit 1; }
	bash scripts/install_browser.sh
	$(PYTHON) -m venv $(VENV)
	bash scripts/build_llama.sh $(BIN)/python
	$(BIN)/python -m pip install --quiet --require-hashes --only-binary llama-cpp-python -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m pip check
	touch $(STAMP)

# Resolves pyproject.toml again (newest releases that fit it) with uv, installed in a
# throwaway venv, and rewrites requirements.lock. Exact pins there (litellm, ...) stay exact.
lock:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp" requirements.lock.tmp' EXIT; \
	$(PYTHON) -m venv "$$tmp/venv"; \
	"$$tmp/venv/bin/python" -m pip install --quiet uv==$(UV_VERSION); \
	{ printf '%s\n' "# Every package \`make\` installs into .venv: pyproject.toml's dependencies and extras"; \
	  printf '%s\n' "# ($(LOCKED_EXTRAS)), pip and setuptools; exact versions, sha256 of every file of each"; \
	  printf '%s\n' "# release, any platform, Python >= 3.11. llama-cpp-python's hash is its sdist's:"; \
	  printf '%s\n' "# scripts/build_llama.sh builds the wheel from it, portably, before this file is installed."; \
	  printf '%s\n' "# Regenerate with \`make lock\` (uv $(UV_VERSION) in a throwaway venv), which runs:"; \
	  printf '%s\n' "#   printf 'pip\\nsetuptools>=77\\n' | uv pip compile --no-config --universal --python-version 3.11"; \
	  printf '%s\n' "#     --generate-hashes $(LOCKED_EXTRAS:%=--extra %) --no-header pyproject.toml -"; \
	  printf '%s\n' "# dependencies sha256: $$($(DEPS_HASH))"; \
	  printf 'pip\nsetuptools>=77\n' | "$$tmp/venv/bin/uv" pip compile --quiet --no-config --universal \
		--python-version 3.11 --generate-hashes $(LOCKED_EXTRAS:%=--extra %) --no-header pyproject.toml -; \
	} >requirements.lock.tmp; \
	mv requirements.lock.tmp requirements.lock; \
	grep '^litellm==' requirements.lock

# The main job: the flagship skill-society scenario with a mixed society (98 learned agents
# and 2 LLM agents on the embedded local model) sharing artifacts over a small world.
# Exits non-zero when the LLM agents' calls failed or fell back (see README).
demo: $(STAMP)
	$(BIN)/society run skill-society --seed 1 --set agents=mixed --set population=100 \
		--set split=learned:98,llm:2 --set steps=12 --set eval_every=4

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --max-worker-restart 0

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_engine.py

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
