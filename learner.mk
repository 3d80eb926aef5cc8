# What a learner runs: set up .venv, open the course, ask what the machine offers.
# The course repository's Makefile includes this file; the student edition ships it as its Makefile
# (course_tools/handout.py), so both set up and open the course with the same recipe.
#   make lab    set up .venv the first time, then open the course in JupyterLab (the learner view)
#   make env    what this machine offers the course
#   make bench  chapter 01's matrix-product sweep on every device here

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch is installed before the project so pip never pulls a build you did not choose (README, "Which torch you
# get"). pip is asked first what it would install (a dry run: metadata only); where that is a CUDA build (on Linux,
# PyPI's torch pulls the nvidia-* wheels, several GB) and the machine has no NVIDIA driver, uv installs torch's CPU
# build from PyTorch's own index instead (uv knows that index: --torch-backend=cpu). TORCH_BACKEND=cu126 (or any
# backend uv names) asks for that build; TORCH_SPEC for another version or index.
TORCH_SPEC ?= torch==2.13.0
TORCH_BACKEND ?=
TORCH_PLAN ?= $(VENV)/torch-plan.json
NVIDIA_DRIVER ?= /proc/driver/nvidia
# the project's extras to install: the course repository asks for [test]; the student edition for none
EXTRAS ?=
STAMP := $(VENV)/.installed
export PATH := $(abspath $(VENV))/bin:$(PATH)
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
LAB_ARGS ?=
.DEFAULT_GOAL ?= learner-help

.PHONY: learner-help setup lab env bench clean-venv torch torch-route

learner-help:
	@echo "make lab     open the course in JupyterLab (sets up .venv first if needed)"
	@echo "make env     what this machine offers the course"
	@echo "make bench   chapter 01's matrix-product sweep on every device here"

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@$(PY) -c "import torch" 2>/dev/null || $(MAKE) --no-print-directory torch
	$(PY) -m pip install --quiet -e ".$(EXTRAS)"
	@touch $(STAMP)

# torch alone, the way torch-route says
torch:
	@test -n "$(TORCH_BACKEND)" || $(PY) -m pip install --dry-run --quiet --ignore-installed --report $(TORCH_PLAN) $(TORCH_SPEC)
	@route=$$($(MAKE) --no-print-directory -s torch-route); echo "torch: $$route"; case $$route in \
	  uv-*) $(PY) -m pip install --quiet uv && $(VENV)/bin/uv pip install --python $(PY) --torch-backend=$${route#uv-} $(TORCH_SPEC) ;; \
	  *) $(PY) -m pip install --quiet $(TORCH_SPEC) ;; esac

# how torch gets installed here: pip, or uv-<backend> (uv-cpu: pip would pull a CUDA build, and there is no NVIDIA
# driver to use it), from the dry run's plan in TORCH_PLAN
torch-route:
	@if [ -n "$(TORCH_BACKEND)" ]; then echo "uv-$(TORCH_BACKEND)"; \
	elif [ ! -e "$(NVIDIA_DRIVER)" ] && grep -q '"name": "nvidia-' "$(TORCH_PLAN)" 2>/dev/null; then echo uv-cpu; \
	else echo pip; fi

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
# Each edition keeps its own JupyterLab workspace (open tabs, layout): the Korean lab never reopens the English
# notebooks the English lab left open, nor starts their kernels. LAB_ARGS="--port 8890" picks the port.
WORKSPACES := $(abspath $(VENV))/lab-workspaces/$(EDITION)
JUPYTER_LAB = $(VENV)/bin/jupyter lab $(ROOT_FLAG) --ServerApp.root_dir=. --LabApp.workspaces_dir="$(WORKSPACES)" $(LAB_ARGS) $(EDITION_DIR)notebooks/00_start/00_start.ipynb

lab: $(STAMP)
	COURSE_LANG=$(EDITION) JUPYTER_CONFIG_PATH="$(LEARNER_VIEW)$(EDITION_VIEW)$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" $(JUPYTER_LAB)

env: $(STAMP)
	$(PY) -m helpers env

bench: $(STAMP)
	$(PY) -m helpers bench

clean-venv:
	rm -rf $(VENV)
