# Two commands do everything on a fresh machine (see README.md):
#   make lab    set up what is missing, then open the course in JupyterLab
#   make test   set up what is missing, then run every test
# The virtual environment is built once and rebuilt when pyproject.toml changes.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch is installed before the project so pip never pulls a build you did not choose.
# On Linux with an NVIDIA GPU this is the CUDA build; on these CI machines the CPU build.
# Override for another build, e.g.  make TORCH_SPEC="torch --index-url <your CUDA wheel index>"
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed
export PATH := $(abspath $(VENV))/bin:$(PATH)
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
LAB_ARGS ?=
PYTEST_ARGS ?=
ASSIGNMENT ?=
STUDENT ?=
OUT ?=

.PHONY: help setup lab lab-instructor test test-fast test-torch-floor release grade feedback export handout env bench gpu-wheelhouse gpu-check clean-venv

help:
	@echo "make lab       open the course in JupyterLab, learner view (sets up .venv first if needed)"
	@echo "make lab-instructor  the same with the instructor view: Create Assignment and the formgrader"
	@echo "make test      run every test (sets up .venv first if needed)"
	@echo "make test-fast unit tests and exercise checks only (no notebooks, no nbgrader round trip)"
	@echo "make test-torch-floor  chapters and unit tests under the oldest torch pyproject.toml promises (a 2nd venv)"
	@echo "make env       what this machine offers the course"
	@echo "make release   regenerate notebooks/ from solutions/ (refuses to overwrite your edits)"
	@echo "make grade     grade submitted/ [ASSIGNMENT=.. STUDENT=..]; prints a status table"
	@echo "make feedback  HTML feedback for graded submissions (hidden tests stay hidden)"
	@echo "make export    grades.csv with a status column beside each score"
	@echo "make handout OUT=<dir>  the student edition in <dir> and <dir>.zip (no solutions, no hidden tests)"
	@echo "make gpu-wheelhouse  wheels a GPU machine without an index needs for gpu-check (into .whl)"
	@echo "make gpu-check       on a CUDA machine: every chapter, gpu tests and measurements; results/<gpu>/ [GPU_ARGS=--dry-run]"

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[test]"
	@touch $(STAMP)

# Two views of the course, each a Jupyter config folder put first on the config path (README):
# the learner's (the Assignments list and Validate) and the instructor's (also Create Assignment and the
# formgrader). Neither asks to fetch Jupyter news. The server runs from the course folder, so nbgrader
# reads nbgrader_config.py (the course id and the exchange) from here.
LEARNER_VIEW := $(abspath .jupyter/learner)
INSTRUCTOR_VIEW := $(abspath .jupyter/instructor)
JUPYTER_LAB = $(VENV)/bin/jupyter lab $(ROOT_FLAG) --ServerApp.root_dir=. $(LAB_ARGS) notebooks/00_start/00_start.ipynb

lab: $(STAMP)
	JUPYTER_CONFIG_PATH="$(LEARNER_VIEW)$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" $(JUPYTER_LAB)

lab-instructor: $(STAMP)
	JUPYTER_CONFIG_PATH="$(INSTRUCTOR_VIEW)$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" $(JUPYTER_LAB)

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

# the unit tests and in-process exercise checks only: no notebook runs, no real nbgrader or Jupyter (about a minute)
test-fast: $(STAMP)
	$(PY) -m pytest -m "not slow" tests $(PYTEST_ARGS)

# The oldest torch the course promises is pyproject.toml's "torch>=X" (the one place it is written); this
# target checks that promise in a second venv that holds only torch X and reuses .venv for everything else
# (.ci/floor-venv says how). CI runs it after `make test`. What runs there: every chapter under nbval and the
# unit tests (about 3 min on 2 cores); the exercise checks with every wrong submission cost 6-8 min more:
#   make test-torch-floor FLOOR_PYTEST='-m "not slow" solutions tests'
TORCH_FLOOR := $(shell sed -n 's/^ *"torch>=\([0-9.]*\)",*$$/\1/p' pyproject.toml)
FLOOR_VENV ?= .venv-torch-floor
FLOOR_STAMP := $(FLOOR_VENV)/.installed
FLOOR_PYTEST ?= -m "not slow" solutions tests --ignore=tests/test_exercises.py --ignore=tests/test_release.py

$(FLOOR_STAMP): pyproject.toml .ci/floor-venv $(STAMP)
	@test -n "$(TORCH_FLOOR)" || { echo 'pyproject.toml has no "torch>=X" line to read the floor from' >&2; exit 1; }
	bash .ci/floor-venv $(VENV) $(FLOOR_VENV) "torch==$(TORCH_FLOOR)"
	@touch $(FLOOR_STAMP)

test-torch-floor: $(FLOOR_STAMP)
	COURSE_TORCH_FLOOR=$(TORCH_FLOOR) $(FLOOR_VENV)/bin/python -m pytest $(FLOOR_PYTEST) $(PYTEST_ARGS)

env: $(STAMP)
	$(PY) -m helpers env

release: $(STAMP)
	$(PY) -m helpers release

# quoted, so STUDENT="pat smith" stays one argument
grade: $(STAMP)
	$(PY) -m helpers grade $(if $(ASSIGNMENT),--assignment "$(ASSIGNMENT)") $(if $(STUDENT),--student "$(STUDENT)")

feedback: $(STAMP)
	$(PY) -m helpers feedback $(if $(ASSIGNMENT),--assignment "$(ASSIGNMENT)") $(if $(STUDENT),--student "$(STUDENT)")

export: $(STAMP)
	$(PY) -m helpers export

# quoted, so OUT="my folder" stays one argument
handout: $(STAMP)
	@test -n "$(OUT)" || { echo "usage: make handout OUT=<folder>   (writes <folder> and <folder>.zip beside it)"; exit 2; }
	$(PY) -m helpers handout --out "$(OUT)"

bench: $(STAMP)
	$(PY) -m helpers bench

# The GPU check runs on a GPU machine, over that machine's own torch (GPU_PYTHON), not in .venv:
# `make gpu-wheelhouse` here, carry .whl there, then `make gpu-check` there. GPU_ARGS=--dry-run lists the steps.
WHEELHOUSE ?= .whl
GPU_PYTHON ?= $(if $(wildcard $(PY)),$(PY),python3)
GPU_ARGS ?=

gpu-wheelhouse: $(STAMP)
	$(PY) -m helpers gpu-wheelhouse --dest "$(WHEELHOUSE)"

gpu-check:
	GPU_CHECK_COMMAND="make gpu-check" $(GPU_PYTHON) -m helpers gpu-check --wheelhouse "$(WHEELHOUSE)" $(GPU_ARGS)

clean-venv:
	rm -rf $(VENV)
