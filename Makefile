# make lab | make lab-instructor | make test | make book | make doctor | make clean | make distclean
# Each target creates .venv (python3 -m venv) on first use and installs the package
# editable with the extra it needs, with the pins of constraints/py<X.Y>.txt for the venv's
# Python when that file exists (pip then installs without backtracking; Python 3.9-3.12).
# An install is redone only when pyproject.toml or the constraints file is newer than its
# stamp (.venv/.installed-<extra>); a bigger extra counts for a smaller one (dev includes
# book includes lab).

PYTHON    ?= python3
VENV      ?= .venv
PY        := $(VENV)/bin/python
PIP_FLAGS ?= -q --disable-pip-version-check
# the pins for the venv's Python (CONSTRAINTS=none: install without them)
CONSTRAINTS ?= auto
# `make lab` serves the student's workspace (made and updated by `python -m rknnlab
# workspace`: labs without solutions, never overwriting what the student edited);
# `make lab-instructor` serves the sources (NOTEBOOK_DIR, default the repository).
# Extra arguments for JupyterLab: e.g. make lab LAB_ARGS="--no-browser --port 8890", on a
# board make lab LAB_ARGS="--ip=0.0.0.0 --no-browser". As root (containers) JupyterLab
# refuses to start without --allow-root, so that is added for root.
WORKSPACE    ?= workspace
NOTEBOOK_DIR ?= .
LAB_ARGS     ?=
LAB_ROOT_ARG := $(if $(filter 0,$(shell id -u)),--allow-root)
# auto: the board's NPU where `rknnlab doctor` finds one, else the simulator
RKNNLAB_BACKEND ?= auto
# `make test` runs the suite in TEST_WORKERS processes (pytest-xdist), a test file per process
# at a time, the longest files first (tests/conftest.py: the order, the tests that run alone);
# make test TEST_PARALLEL= runs it in one process
TEST_WORKERS  ?= 3
TEST_PARALLEL ?= -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

.PHONY: lab lab-instructor workspace test book doctor clean distclean venv install-lab install-book install-dev

$(PY):
	$(PYTHON) -m venv $(VENV)

venv: $(PY)

# $(call install,EXTRA,EXTRAS THAT INCLUDE IT)
define install
	@c=""; if [ "$(CONSTRAINTS)" = auto ]; then \
	  c=constraints/py$$($(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])').txt; \
	  [ -f "$$c" ] || c=""; \
	elif [ "$(CONSTRAINTS)" != none ]; then c="$(CONSTRAINTS)"; fi; \
	for s in $(2); do \
	  if [ -f $(VENV)/.installed-$$s ] && [ $(VENV)/.installed-$$s -nt pyproject.toml ] \
	     && { [ -z "$$c" ] || [ $(VENV)/.installed-$$s -nt "$$c" ]; }; then exit 0; fi; \
	done; \
	echo "pip install -e '.[$(1)]'$${c:+ -c $$c} into $(VENV)"; \
	$(PY) -m pip install $(PIP_FLAGS) -e '.[$(1)]' $${c:+-c "$$c"} && touch $(VENV)/.installed-$(1)
endef

install-lab: $(PY)
	$(call install,lab,lab book dev)

install-book: $(PY)
	$(call install,book,book dev)

install-dev: $(PY)
	$(call install,dev,dev)

# the student's working copy of the course (made on first run, updated after)
workspace: install-lab
	$(PY) -m rknnlab workspace --dir $(WORKSPACE)

# JupyterLab on the workspace (students) or on the sources (instructors)
lab: workspace
	RKNNLAB_BACKEND=$(RKNNLAB_BACKEND) $(VENV)/bin/jupyter lab --notebook-dir=$(WORKSPACE) $(LAB_ROOT_ARG) $(LAB_ARGS)

lab-instructor: install-lab
	RKNNLAB_BACKEND=$(RKNNLAB_BACKEND) $(VENV)/bin/jupyter lab --notebook-dir=$(NOTEBOOK_DIR) $(LAB_ROOT_ARG) $(LAB_ARGS)

test: install-dev
	$(PY) -m pytest -q --durations=25 $(TEST_PARALLEL) tests

book: install-book
	$(PY) -m rknnlab book build

doctor: install-lab
	$(PY) -m rknnlab doctor

# build output and caches (keeps .venv and the student's workspace, checkpoints included;
# tools/models/ has its own venv and is left alone)
clean:
	rm -rf _build tests/_build .pytest_cache lib/*.egg-info
	find . -path ./tools/models/.venv -prune -o -path ./$(VENV) -prune -o -path ./.venv-py39 -prune \
	  -o -path ./$(WORKSPACE) -prune -o \
	  \( -name __pycache__ -o -name .ipynb_checkpoints \) -type d -print0 | xargs -0 rm -rf

# clean + the virtual environment
distclean: clean
	rm -rf $(VENV) .venv-py39
