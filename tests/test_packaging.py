"""The two install routes (pip via pyproject.toml, conda via environment.yml) ask for the same packages."""

import re
import tomllib

from course import ROOT

#: conda-forge names that differ from the names on the Python package index
CONDA_NAMES = {"pytorch": "torch"}


def _pip_requirements():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + project["optional-dependencies"]["test"]
    return {re.split(r"[<>=!~ ]", r, maxsplit=1)[0].lower(): r.replace(" ", "") for r in reqs}


def _conda_requirements():
    found = {}
    text = (ROOT / "environment.yml").read_text()
    for line in text.split("\ndependencies:", 1)[1].splitlines():
        match = re.match(r"^\s+-\s+([A-Za-z0-9_.\-]+)(.*)$", line)
        if match and match.group(1) not in ("python", "pip"):
            name = CONDA_NAMES.get(match.group(1).lower(), match.group(1).lower())
            found[name] = name + match.group(2).replace(" ", "")
    return found


def test_environment_yml_lists_the_same_packages_and_versions_as_pyproject():
    pip, conda = _pip_requirements(), _conda_requirements()
    assert set(pip) == set(conda), f"only in pyproject: {set(pip) - set(conda)}; only in environment.yml: {set(conda) - set(pip)}"
    for name in pip:
        assert pip[name] == conda[name], f"{name}: pyproject says {pip[name]!r}, environment.yml says {conda[name]!r}"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make lab" in readme
    assert re.search(r"^make test$", (ROOT / ".ci" / "run").read_text(), flags=re.M)
