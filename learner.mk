# What a learner runs: set up .venv, open the course, ask what the machine offers.
# The course repository's Makefile includes this file; the student edition ships it as its Makefile
# (course_tools/handout.py), so both set up and open the course with the same recipe.
#   make lab    set up .venv the first time, then open the course in JupyterLab (the learner view)
#   make env    what this machine offers the course
#   make bench  chapter 01's matrix-product sweep on every device here

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch is installed before the project so pip never pulls a build you did not choose.
# On Linux with an NVIDIA GPU this is the CUDA build; on these CI machines the CPU build.
# Override for another build, e.g.  make TORCH_SPEC="torch --index-url <your CUDA wheel index>"
TORCH_SPEC ?= torch==2.13.0
# the project's extras to install: the course repository asks for [test]; the student edition for none
EXTRAS ?=
STAMP := $(VENV)/.installed
export PATH := $(abspath $(VENV))/bin:$(PATH)
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
LAB_ARGS ?=
.DEFAULT_GOAL ?= learner-help

.PHONY: learner-help setup lab env bench clean-venv

learner-help:
	@echo "make lab     open the course in JupyterLab (sets up .venv first if needed)"
	@echo "make env     what this machine offers the course"
	@echo "make bench   chapter 01's matrix-product sweep on every device here"

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".$(EXTRAS)"
	@touch $(STAMP)

# The edition: Korean (한국어판, the course folder ko/) with `make lab COURSE_LANG=ko` or `make lab LANG=ko`, or
# when the shell's own locale is Korean (LANG=ko_KR.UTF-8); English otherwise. The helpers read the same
# variables (helpers/i18n.py), and the Korean notebooks set the language in their first cells.
EDITION := $(if $(and $(filter ko%,$(or $(COURSE_LANG),$(LANG))),$(wildcard ko/notebooks)),ko,en)
EDITION_DIR := $(if $(filter ko,$(EDITION)),ko/,)
# The learner's view (README): a Jupyter config folder put first on the config path; the Assignments list
# and Validate, no instructor panels, no news pop-up. The server runs from the course folder.
LEARNER_VIEW := $(abspath .jupyter/learner)
# the Korean edition's JupyterLab speaks Korean too (menus from jupyterlab-language-pack-ko-KR): a default setting
EDITION_VIEW := $(if $(filter ko,$(EDITION)),:$(abspath .jupyter/korean),)
JUPYTER_LAB = $(VENV)/bin/jupyter lab $(ROOT_FLAG) --ServerApp.root_dir=. $(LAB_ARGS) $(EDITION_DIR)notebooks/00_start/00_start.ipynb

lab: $(STAMP)
	COURSE_LANG=$(EDITION) JUPYTER_CONFIG_PATH="$(LEARNER_VIEW)$(EDITION_VIEW)$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" $(JUPYTER_LAB)

env: $(STAMP)
	$(PY) -m helpers env

bench: $(STAMP)
	$(PY) -m helpers bench

clean-venv:
	rm -rf $(VENV)
