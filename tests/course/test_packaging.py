"""The two install routes (pip via pyproject.toml, conda via environment.yml) ask for the same packages, and the
oldest torch they promise is the one `make test-torch-floor` (CI) checks."""

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib

import pytest

import nbformat
import torch

from support.layout import ROOT, grade_cells, load, nbgrader_meta, solution_path

#: conda-forge names that differ from the names on the Python package index
CONDA_NAMES = {"pytorch": "torch"}


def _pip_requirements():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + project["optional-dependencies"]["test"]
    return {re.split(r"[<>=!~ ;]", r, maxsplit=1)[0].lower(): r.replace(" ", "") for r in reqs}


def _conda_requirements():
    found = {}
    text = (ROOT / "environment.yml").read_text()
    for line in text.split("\ndependencies:", 1)[1].splitlines():
        # a package with a platform marker sits in the pip: list, quoted as pip reads it
        match = re.match(r"""^\s+-\s+["']?([A-Za-z0-9_.\-]+)(.*?)["']?$""", line)
        if match and match.group(1) not in ("python", "pip"):
            name = CONDA_NAMES.get(match.group(1).lower(), match.group(1).lower())
            found[name] = name + match.group(2).replace(" ", "")
    return found


def test_environment_yml_lists_the_same_packages_and_versions_as_pyproject():
    pip, conda = _pip_requirements(), _conda_requirements()
    assert set(pip) == set(conda), f"only in pyproject: {set(pip) - set(conda)}; only in environment.yml: {set(conda) - set(pip)}"
    for name in pip:
        assert pip[name] == conda[name], f"{name}: pyproject says {pip[name]!r}, environment.yml says {conda[name]!r}"


def _torch_floor() -> str:
    """The oldest torch the course promises: the X of pyproject.toml's "torch>=X" (environment.yml says the same)."""
    requirement = _pip_requirements()["torch"]
    match = re.fullmatch(r"torch>=(\d+(?:\.\d+)*)", requirement)
    assert match, f"pyproject.toml asks for {requirement!r}; `make test-torch-floor` reads the floor from 'torch>=X'"
    return match.group(1)


def _release(version: str) -> tuple[int, ...]:
    """'2.11.0+cu130' -> (2, 11, 0)"""
    return tuple(int(part) for part in re.match(r"\d+(?:\.\d+)*", version).group(0).split("."))


def test_make_test_torch_floor_installs_exactly_the_floor_pyproject_promises():
    """The Makefile reads the floor from pyproject.toml; this proves it reads it right (a dry run, nothing installed)."""
    floor = _torch_floor()
    dry = subprocess.run(["make", "-n", "-B", "test-torch-floor"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert f'"torch=={floor}"' in dry.stdout and f"COURSE_TORCH_FLOOR={floor} " in dry.stdout, dry.stdout


def test_the_torch_under_test_keeps_the_promise_and_the_floor_run_has_the_floor_itself():
    floor, have = _release(_torch_floor()), _release(torch.__version__)
    assert have >= floor, f"torch {torch.__version__} is older than the floor pyproject.toml promises ({_torch_floor()})"
    checked = os.environ.get("COURSE_TORCH_FLOOR")  # set by `make test-torch-floor`
    if checked is not None:
        assert _release(checked) == floor, f"the floor run checks torch {checked}, pyproject.toml promises {floor}"
        assert have[:len(floor)] == floor and not any(have[len(floor):]), (
            f"the floor run imports torch {torch.__version__} ({torch.__file__}), not the floor {_torch_floor()}")


def test_ci_runs_the_readme_test_command():
    """README's "runs every test" command is CI's; README.ko.md names the same two commands."""
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"^(make [\w-]+) +# run every test", readme, flags=re.M)
    assert command and command.group(1) == "make test-all" and "make lab" in readme, "README's test command"
    assert "make test-all" in (ROOT / "README.ko.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test-all$", ci, flags=re.M)
    assert re.search(r"^make test-torch-floor$", ci, flags=re.M), "CI must check the torch floor too"
    assert ci.index("make test-all\n") < ci.index("make test-torch-floor")


def test_make_test_all_runs_every_tier_and_make_test_the_fast_ones():
    """The tiers are folders; `make test` leaves out only the end-to-end tier, the simulated GPU, slow tests and
    load; `make test-all` ends with `make gpu-sim`, which runs tests/gpu_sim in the floor venv (a CUDA build)."""
    make = (ROOT / "Makefile").read_text()
    fast = re.search(r"^test: .*\n\t(.*)$", make, flags=re.M).group(1)
    assert "tests/unit tests/course solutions" in fast and "e2e" not in fast and "gpu_sim" not in fast
    every = re.search(r"^test-all: .*\n\t(.*)\n\t(.*)\n\t(.*)$", make, flags=re.M)
    assert '-m "not load"' in every.group(1) and "tests/" not in every.group(1)  # testpaths: everything
    assert "-m load" in every.group(2) and every.group(3) == "$(MAKE) gpu-sim"
    gpu_sim = re.search(r"^gpu-sim: .*\n\t(.*)$", make, flags=re.M).group(1)
    assert "$(FLOOR_VENV)/bin/python" in gpu_sim and "$(GPU_SIM_TESTS)" in gpu_sim
    assert re.search(r"^GPU_SIM_TESTS := tests/gpu_sim$", make, flags=re.M)
    assert {p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and not p.name.startswith("__")} == {
        "unit", "course", "e2e", "gpu_sim", "support", "bench", "submissions"}


@pytest.mark.slow
def test_a_non_editable_install_has_every_subpackage_and_grades(released_course, tmp_path):
    """A wheel (Colab, a course server) must carry helpers.checks and course_tools.grading: nbgrader_config.py
    and `python -m course_tools grade` import them. Built, installed into a bare folder, used from outside the repo."""
    wheels, site, course = tmp_path / "wheels", tmp_path / "site", tmp_path / "course"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(wheels), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    (wheel,) = wheels.glob("*.whl")
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site),
                              str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr
    shutil.copytree(released_course, course, ignore=shutil.ignore_patterns("submitted", "autograded", "feedback"))
    submitted = course / "submitted" / "alice" / "00_start"
    submitted.mkdir(parents=True)
    answer = {nbgrader_meta(c)["grade_id"]: c.source for c in load(solution_path("00_start")).cells
              if nbgrader_meta(c).get("solution")}
    nb = load(course / "release" / "00_start" / "00_start.ipynb")
    for cell in nb.cells:  # the learner's notebook with the reference answers typed in
        cell.source = answer.get(nbgrader_meta(cell).get("grade_id"), cell.source)
    nbformat.write(nb, str(submitted / "00_start.ipynb"))
    env = {**os.environ, "PYTHONPATH": str(site)}

    def run(*args):
        return subprocess.run([sys.executable, *args], cwd=course, env=env, capture_output=True, text=True, timeout=600)

    where = run("-c", "import helpers, helpers.checks.core, course_tools.cli; print(helpers.__file__)")
    assert where.returncode == 0 and where.stdout.strip().startswith(str(site)), where.stdout + where.stderr
    assert run("-m", "course_tools", "grade", "--help").returncode == 0
    assert run("-m", "nbgrader", "db", "student", "add", "alice").returncode == 0
    # --no-sandbox: the sandbox lets the kernel read the venv, not this test's scratch install folder
    graded = run("-m", "course_tools", "grade", "--assignment", "00_start", "--no-progress", "--no-sandbox")
    assert graded.returncode == 0, graded.stdout + graded.stderr
    full = sum(grade_cells(load(solution_path("00_start"))).values())
    assert re.search(rf"alice +{full}/{full} graded", graded.stdout), graded.stdout


def test_every_phony_make_target_is_defined():
    text = (ROOT / "Makefile").read_text()
    phony = re.search(r"^\.PHONY:(.*)$", text, flags=re.M).group(1).split()
    defined = set(re.findall(r"^([A-Za-z][\w-]*):", text, flags=re.M))
    assert set(phony) <= defined, f"declared in .PHONY but never defined: {sorted(set(phony) - defined)}"


def _route(tmp_path, plan: list[str] | None, **make_vars) -> str:
    """What `make torch-route` answers for a pip plan naming ``plan``'s packages (None: no plan written)."""
    args = [f"TORCH_PLAN={tmp_path / 'plan.json'}", *(f"{k}={v}" for k, v in make_vars.items())]
    if plan is not None:  # pip's own report format (pip install --dry-run --report): indent 2
        report = {"version": "1", "install": [{"metadata": {"name": name, "version": "1"}} for name in plan]}
        (tmp_path / "plan.json").write_text(json.dumps(report, indent=2))
    proc = subprocess.run(["make", "-s", "--no-print-directory", "torch-route", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_a_laptop_without_an_nvidia_gpu_never_gets_the_cuda_build(tmp_path):
    """pip's plan for torch pulls nvidia-* wheels (PyPI's Linux torch): with no NVIDIA driver, uv's CPU build."""
    cuda = ["torch", "nvidia-cublas-cu12", "nvidia-cudnn-cu12", "filelock"]
    assert _route(tmp_path, cuda, NVIDIA_DRIVER=tmp_path / "no-driver") == "uv-cpu"
    assert _route(tmp_path, cuda, NVIDIA_DRIVER=tmp_path) == "pip", "a machine with a GPU keeps the CUDA build"
    assert _route(tmp_path, ["torch", "filelock"], NVIDIA_DRIVER=tmp_path / "no-driver") == "pip"  # a CPU wheel
    assert _route(tmp_path, None, TORCH_BACKEND="cu126") == "uv-cu126"


def test_a_learners_set_up_installs_the_course_alone_and_the_tests_bring_their_tools():
    learner = (ROOT / "learner.mk").read_text()
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^EXTRAS \?=\s*$", learner, flags=re.M) and not re.search(r"^EXTRAS :?=", make, flags=re.M)
    assert '-e ".[test]"' in make
    for target in ("test", "test-all", "test-fast"):
        assert re.search(rf"^{target}: \$\(DEV_STAMP\)", make, flags=re.M), f"make {target} lacks the test tools"
    assert re.search(r"^lab: \$\(STAMP\)$", learner, flags=re.M)


def test_each_edition_opens_its_own_lab_workspace():
    for lang, edition in (("en", "en"), ("ko", "ko")):
        proc = subprocess.run(["make", "-n", "--no-print-directory", "lab", f"COURSE_LANG={lang}"], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
        assert f'--LabApp.workspaces_dir="{ROOT}/.venv/lab-workspaces/{edition}"' in proc.stdout, proc.stdout
