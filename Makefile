# Two commands do everything on a fresh machine (see README.md):
#   make lab        set up what is missing, then open the course in JupyterLab
#   make test-all   set up what is missing, then run every test (what CI runs)
# `make test` is the maintainer's loop: the unit and course tiers and every chapter, under 10 minutes on 2 cores.
# The virtual environment is built once and rebuilt when pyproject.toml changes.

# The learner's targets (setup, lab, env, bench, clean-venv) live in learner.mk, which the student edition
# ships as its own Makefile; this file adds the instructor's and maintainer's targets.
.DEFAULT_GOAL := help
include learner.mk
# a learner's set-up (learner.mk) installs the course alone; the tests' tools (pytest, Playwright, JupyterHub...)
# come with the first test target, into the same .venv
DEV_STAMP := $(VENV)/.installed-dev

$(DEV_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install --quiet -e ".[test]"
	@touch $(DEV_STAMP)

ASSIGNMENT ?=
STUDENT ?=
OUT ?=
PYTEST_ARGS ?=

.PHONY: help lab-instructor test test-all test-fast test-torch-floor gpu-sim release grade feedback export handout gpu-wheelhouse gpu-check

help:
	@echo "make lab       open the course in JupyterLab, learner view (sets up .venv first if needed)"
	@echo "make lab-instructor  the same with the instructor view: Create Assignment and the formgrader"
	@echo "make test      the unit and course tiers and every chapter under nbval (under 10 min; sets up .venv if needed)"
	@echo "make test-all  every test: the above, then end to end (real nbgrader, Jupyter, browser, users), load, gpu-sim (CI)"
	@echo "make test-fast the unit tier only (tests/unit: about a minute)"
	@echo "make test-torch-floor  chapters and unit tests under the oldest torch pyproject.toml promises (a 2nd venv)"
	@echo "make gpu-sim   every chapter and measure_* on a simulated H100 and T4 (GPU-like time; in the floor venv)"
	@echo "make env       what this machine offers the course"
	@echo "make release   regenerate every generated tree: notebooks/, the Korean catalogs, ko/solutions/, ko/notebooks/ (refuses to overwrite your edits)"
	@echo "make grade     grade submitted/ [ASSIGNMENT=.. STUDENT=..]; prints a status table"
	@echo "make feedback  HTML feedback for graded submissions (hidden tests stay hidden)"
	@echo "make export    grades.csv with a status column beside each score"
	@echo "make handout OUT=<dir>  the student edition in <dir> and <dir>.zip (no solutions, no hidden tests)"
	@echo "make gpu-wheelhouse  wheels a GPU machine without an index needs for gpu-check (into .whl)"
	@echo "make gpu-check       on a CUDA machine: every chapter, gpu tests and measurements; results/<gpu>/ [GPU_ARGS=--dry-run]"

# the instructor's view: the learner's, plus Create Assignment and the formgrader (README)
INSTRUCTOR_VIEW := $(abspath .jupyter/instructor)

lab-instructor: $(STAMP)
	JUPYTER_CONFIG_PATH="$(INSTRUCTOR_VIEW)$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" $(JUPYTER_LAB)

# JupyterHub's proxy for the classroom (tests/e2e/test_hub.py; `classroom hub`): npm's configurable-http-proxy, pinned
# in package.json and package-lock.json. Without npm the hub test skips and says so (CI has npm and fails instead).
PROXY := node_modules/.bin/configurable-http-proxy
$(PROXY): package.json package-lock.json
	@if command -v npm >/dev/null; then npm ci --no-audit --no-fund; else echo "npm is missing: tests/e2e/test_hub.py will skip (no JupyterHub proxy)"; fi

# Tests in tiers, one folder each (ARCHITECTURE.md, "Tests"): tests/unit (mirrors the packages), tests/course (rules
# over the repository, every exercise graded in process), tests/e2e (real nbgrader, Jupyter, Chromium, Unix users,
# a machine under load). Two xdist workers; tests/conftest.py keeps a chapter's tests of one module on one worker.
# --max-worker-restart=0: a worker that crashes (a segfault, a pytest-timeout) ends the run with the crashed test
# named. pytest-xdist 3.8 replaces a crashed worker under loadscope and can then wait forever for work it never
# sends (pytest-xdist issues 1323, 1327, 1378): a CI run hung that way until its 90 minutes were spent.
XDIST := -n 2 --dist loadscope --max-worker-restart=0

# (the wrong submissions of chapter 06, two DDP ranks each, are `slow`: test-all grades them; tests/course/test_exercises.py)
test: $(DEV_STAMP)
	$(PY) -m pytest $(XDIST) -m "not slow and not load" tests/unit tests/course solutions $(PYTEST_ARGS)

# everything, as CI runs it; the load tests make every core busy on purpose, so they run alone, after the rest
test-all: $(DEV_STAMP) $(PROXY)
	$(PY) -m pytest $(XDIST) -m "not load" $(PYTEST_ARGS)
	$(PY) -m pytest -n 0 -m load $(PYTEST_ARGS)
	$(MAKE) gpu-sim

test-fast: $(DEV_STAMP)
	$(PY) -m pytest $(XDIST) -m "not slow and not load" tests/unit $(PYTEST_ARGS)

# The oldest torch the course promises is pyproject.toml's "torch>=X" (the one place it is written); this
# target checks that promise in a second venv that holds only torch X and reuses .venv for everything else
# (.ci/floor-venv says how). CI runs it after `make test-all`. What runs there: every chapter under nbval, the unit
# and course tiers and the fast e2e tests (about 7 min on 2 cores); the exercise checks with every wrong submission
# cost 6-8 min more:
#   make test-torch-floor FLOOR_PYTEST='-m "not slow" solutions tests --ignore=tests/unit/helpers/test_cuda_branches.py'
# (the fake-CUDA module stays ignored there: the target's second command runs it in a process of its own)
TORCH_FLOOR := $(shell sed -n 's/^ *"torch>=\([0-9.]*\)",*$$/\1/p' pyproject.toml)
FLOOR_VENV ?= .venv-torch-floor
FLOOR_STAMP := $(FLOOR_VENV)/.installed
# tests/unit/helpers/test_cuda_branches.py (the fake CUDA machine; it runs only on the floor's CUDA build) goes in a
# pytest process of its own, after the rest: what it leaves changed in torch's process (torch.accelerator.synchronize()
# raised "Backend doesn't support synchronizing all streams" in test_speed.py after it) would otherwise fail whichever
# module xdist happens to put after it on the same worker.
FAKE_CUDA_TESTS := tests/unit/helpers/test_cuda_branches.py
# tests/gpu_sim: the simulated H100 and T4 (`make gpu-sim`, part of `make test-all`), on the floor's CUDA build
GPU_SIM_TESTS := tests/gpu_sim
FLOOR_PYTEST ?= $(XDIST) -m "not slow" solutions tests --ignore=tests/course/test_exercises.py --ignore=tests/course/test_release.py --ignore=$(FAKE_CUDA_TESTS) --ignore=$(GPU_SIM_TESTS)

$(FLOOR_STAMP): pyproject.toml .ci/floor-venv $(DEV_STAMP)
	@test -n "$(TORCH_FLOOR)" || { echo 'pyproject.toml has no "torch>=X" line to read the floor from' >&2; exit 1; }
	bash .ci/floor-venv $(VENV) $(FLOOR_VENV) "torch==$(TORCH_FLOOR)"
	@touch $(FLOOR_STAMP)

# Every chapter and every measure_* on a simulated H100 and T4: fake CUDA tensors on GPU-like time (tests/support/
# gpu_model.py), and what a real GPU should print there (tests/support/gpu_sim.py). It needs a CUDA build of torch,
# so it runs in the floor venv; each chapter in a Python of its own, one at a time: the simulated host clock is the
# main thread's CPU time, which two chapters sharing the 2 cores inflate unevenly (a CI run printed 08's "syncs cost
# time" backwards on the H100 with two workers; alone it is right). About 20 minutes on 2 cores.
gpu-sim: $(FLOOR_STAMP)
	COURSE_TORCH_FLOOR=$(TORCH_FLOOR) $(FLOOR_VENV)/bin/python -m pytest -n 0 $(GPU_SIM_TESTS) $(PYTEST_ARGS)

test-torch-floor: $(FLOOR_STAMP)
	COURSE_TORCH_FLOOR=$(TORCH_FLOOR) $(FLOOR_VENV)/bin/python -m pytest $(FLOOR_PYTEST) $(PYTEST_ARGS)
	COURSE_TORCH_FLOOR=$(TORCH_FLOOR) $(FLOOR_VENV)/bin/python -m pytest -n 0 $(FAKE_CUDA_TESTS) $(PYTEST_ARGS)

# Every generated tree in one command: the Colab badges and cells from pyproject.toml's Repository (none without it),
# notebooks/ from solutions/, the Korean catalogs in step with the English
# (translations/ko/*.po), the Korean solutions and notebooks and the helpers' compiled messages, then what is left
# to translate (a translator's work: the Korean edition shows the English until then; CI fails on it).
release: $(STAMP)
	$(PY) -m course_tools colab
	$(PY) -m course_tools release
	$(PY) -m course_tools translate update
	$(PY) -m course_tools translate build
	$(PY) -m course_tools release --course ko
	@$(PY) -m course_tools translate check || echo "make release: the entries above are untranslated or fuzzy (translations/ko/); the Korean edition shows the English for them until they are translated"

# quoted, so STUDENT="pat smith" stays one argument
grade: $(STAMP)
	$(PY) -m course_tools grade $(if $(ASSIGNMENT),--assignment "$(ASSIGNMENT)") $(if $(STUDENT),--student "$(STUDENT)")

feedback: $(STAMP)
	$(PY) -m course_tools feedback $(if $(ASSIGNMENT),--assignment "$(ASSIGNMENT)") $(if $(STUDENT),--student "$(STUDENT)")

export: $(STAMP)
	$(PY) -m course_tools export

# quoted, so OUT="my folder" stays one argument
handout: $(STAMP)
	@test -n "$(OUT)" || { echo "usage: make handout OUT=<folder>   (writes <folder> and <folder>.zip beside it)"; exit 2; }
	$(PY) -m course_tools handout --out "$(OUT)"

# The GPU check runs on a GPU machine, over that machine's own torch (GPU_PYTHON), not in .venv:
# `make gpu-wheelhouse` here, carry .whl there, then `make gpu-check` there. GPU_ARGS=--dry-run lists the steps.
WHEELHOUSE ?= .whl
GPU_PYTHON ?= $(if $(wildcard $(PY)),$(PY),python3)
GPU_ARGS ?=

gpu-wheelhouse: $(STAMP)
	$(PY) -m course_tools gpu-wheelhouse --dest "$(WHEELHOUSE)"

gpu-check:
	GPU_CHECK_COMMAND="make gpu-check" $(GPU_PYTHON) -m course_tools gpu-check --wheelhouse "$(WHEELHOUSE)" $(GPU_ARGS)
