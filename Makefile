# benchloupe developer entry points. Everything goes through a local .venv.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DB ?= demo.db

.PHONY: setup demo test lint bench clean

# pip for .venv: the host's own (pip >= 22.3 installs into another interpreter with --python), so a fresh venv is
# made without pip of its own (ensurepip alone took ~20 s of a 2-core machine under load); a host without a usable
# pip gets a venv with pip, as before. Quiet: no progress bars, version nag or questions; errors still print.
HOST_PIP_OK = $(shell $(PY) -c 'import pip, sys; sys.exit(tuple(map(int, pip.__version__.split(".")[:2])) < (22, 3))' \
	2>/dev/null && echo yes)
PIP = $(if $(HOST_PIP_OK),$(PY) -m pip --python $(BIN)/python,$(BIN)/python -m pip) install -qq \
	--disable-pip-version-check --no-input --progress-bar off

# What the demo's first screen needs (issue 32 point 16): the runtime dependencies less pyarrow, matplotlib and
# zstandard (scripts/demo_deps.py: each imported only where it is used, no demo screen uses them), and the checkout
# on the venv's path by a .pth file (pip's editable build spent ~13 s of a loaded machine on its isolated
# setuptools). The rest comes after the first screen: `make demo` runs the full editable install (the
# `benchloupe` command, the other dependencies) and the byte-compiling in the background, niced (BACKGROUND);
# `make test` and the others need the full install ($(STAMP)) first. Installed without byte-compiling (half of
# pip's time here). $(LOCK) keeps two pips out of one venv (a `make test` while the background install runs).
DEMO_STAMP := $(VENV)/.installed-demo
CHECKOUT_PTH = $(BIN)/python -c 'import os, sys, sysconfig; p = os.path.join(sysconfig.get_paths()["purelib"], \
	"benchloupe-checkout.pth"); open(p, "w").write(sys.argv[2] + "\n") if sys.argv[1] == "add" else \
	os.path.exists(p) and os.remove(p)'
LOCK = $(if $(shell command -v flock),flock $(VENV)/.pip-lock)
COMPILE = $(BIN)/python -m compileall -q -j 0 $(VENV)/lib >/dev/null 2>&1
$(DEMO_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(if $(HOST_PIP_OK),--without-pip) $(VENV)
	$(PY) scripts/demo_deps.py | xargs $(LOCK) $(PIP) --no-compile
	test -f $(STAMP) || $(CHECKOUT_PTH) add "$(CURDIR)"
	touch $(DEMO_STAMP)

$(STAMP): $(DEMO_STAMP)
	$(LOCK) $(PIP) --no-compile -e .
	$(CHECKOUT_PTH) remove
	touch $(STAMP)

BACKGROUND = (nice -n 19 sh -c '$(MAKE) -s $(STAMP) && $(COMPILE)' >$(VENV)/.background.log 2>&1 &)

# What the suite needs: the full install, the test extra, and torch for the torch-backend tests (the [gpu]
# extra): the pinned 2.13.0 is a CPU build on these machines; a plain `pip install torch` on Linux pulls the
# multi-GB CUDA build (README, "Installing"). One pip run for all of it (issue 36 point 4: the demo's
# dependencies, the editable install, torch and the test extra were four runs, each resolving the dependencies
# again, and torch's files were byte-compiled one by one as pip installed them), then one parallel compileall.
# It is a superset of the demo's and the full install, so their stamps are set too.
TEST_STAMP := $(VENV)/.installed-test
$(TEST_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(if $(HOST_PIP_OK),--without-pip) $(VENV)
	$(LOCK) $(PIP) --no-compile torch==2.13.0 -e '.[test]'
	$(CHECKOUT_PTH) remove
	$(COMPILE) || true
	touch $(DEMO_STAMP) $(STAMP) $(TEST_STAMP)

setup: $(TEST_STAMP)

# A real LiteLLM proxy for the BenchFill client tests (tests/integration/test_fill_litellm.py). It lives in its own
# venv: its pinned rich/uvicorn/... would change the project's environment.
LITELLM_VENV := .venv-litellm
LITELLM := $(LITELLM_VENV)/bin/litellm
$(LITELLM):
	test -x $(LITELLM_VENV)/bin/python || $(PY) -m venv $(LITELLM_VENV)
	$(LITELLM_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-input --progress-bar off \
		'litellm[proxy]==1.80.0'

## Build the demo workspace into $(DB) and open the workbench on it (headless summary when not a terminal).
demo: $(DEMO_STAMP)
	$(BACKGROUND)
	$(BIN)/python -m benchloupe demo --db $(DB) --open

## Run the whole test suite: `-n auto` is two pytest-xdist workers per usable core (tests/conftest.py; TEST_JOBS=0:
## all in one process, TEST_JOBS=N: N workers).
TEST_JOBS ?= auto
test: $(TEST_STAMP) $(LITELLM)
	BENCHLOUPE_TEST_LITELLM=$(abspath $(LITELLM)) $(BIN)/python -m pytest -n $(TEST_JOBS) --dist worksteal

lint: $(TEST_STAMP)
	$(BIN)/ruff check .

bench: $(TEST_STAMP)
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) $(LITELLM_VENV) demo.db demo.db-wal demo.db-shm
