# make lab | make test | make book | make doctor | make clean | make distclean
# Each target creates .venv (python3 -m venv) on first use and installs the package
# editable with the extra it needs. An install is redone only when pyproject.toml is
# newer than its stamp (.venv/.installed-<extra>); a bigger extra counts for a smaller
# one (dev includes book includes lab).

PYTHON    ?= python3
VENV      ?= .venv
PY        := $(VENV)/bin/python
PIP_FLAGS ?= -q --disable-pip-version-check
# where `make lab` serves JupyterLab from, and extra arguments for it
# (e.g. make lab LAB_ARGS="--no-browser --port 8890"); as root (containers) JupyterLab
# refuses to start without --allow-root, so that is added for root
NOTEBOOK_DIR ?= .
LAB_ARGS     ?=
LAB_ROOT_ARG := $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: lab test book doctor clean distclean venv install-lab install-book install-dev

$(PY):
	$(PYTHON) -m venv $(VENV)

venv: $(PY)

# $(call install,EXTRA,EXTRAS THAT INCLUDE IT)
define install
	@for s in $(2); do \
	  if [ -f $(VENV)/.installed-$$s ] && [ $(VENV)/.installed-$$s -nt pyproject.toml ]; then exit 0; fi; \
	done; \
	echo "pip install -e '.[$(1)]' into $(VENV)"; \
	$(PY) -m pip install $(PIP_FLAGS) -e '.[$(1)]' && touch $(VENV)/.installed-$(1)
endef

install-lab: $(PY)
	$(call install,lab,lab book dev)

install-book: $(PY)
	$(call install,book,book dev)

install-dev: $(PY)
	$(call install,dev,dev)

# JupyterLab on the simulator (on a board, start it yourself with the native
# backend: see README.md)
lab: install-lab
	RKNNLAB_BACKEND=sim $(VENV)/bin/jupyter lab --notebook-dir=$(NOTEBOOK_DIR) $(LAB_ROOT_ARG) $(LAB_ARGS)

test: install-dev
	$(PY) -m pytest -q tests

book: install-book
	$(PY) -m rknnlab book build

doctor: install-lab
	$(PY) -m rknnlab doctor

# build output and caches (keeps .venv; tools/models/ has its own venv and is left alone)
clean:
	rm -rf _build tests/_build .pytest_cache lib/*.egg-info
	find . -path ./tools/models/.venv -prune -o -path ./$(VENV) -prune -o \
	  \( -name __pycache__ -o -name .ipynb_checkpoints \) -type d -print0 | xargs -0 rm -rf

# clean + the virtual environment
distclean: clean
	rm -rf $(VENV)
