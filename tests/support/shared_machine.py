"""A scratch shared machine for the exchange route: an instructor's course, an exchange, a learner's home.

As on a real shared machine (or JupyterHub), the instructor and the learner have different homes and
work in different folders: the instructor in the course folder (this repo's ``nbgrader_config.py``,
one chapter of ``solutions/``, ``COURSE_EXCHANGE`` pointing at the scratch exchange), the learner in
a home that holds no course file, only the two-line nbgrader config INSTRUCTORS.md tells an
administrator to write to ``/etc/jupyter/nbgrader_config.py`` (here in the learner's own Jupyter
config folder, with the scratch exchange for ``/srv/nbgrader/exchange``). Every step is nbgrader's
own command or the course's; tests/e2e/test_exchange_route.py and tests/e2e/test_browser.py share this.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbgrader.utils import get_username

from support.layout import ROOT, load, nbgrader_meta, solution_path

#: nbgrader names a submission after the login that submitted it (here the test's own user), so
#: the roster holds that name, as a shared machine's roster holds login names.
LEARNER = get_username()
SHARED_ROOT = "/srv/nbgrader/exchange"
TIMEOUT_S = 300


def learner_config(exchange: Path) -> str:
    """INSTRUCTORS.md's learner config, word for word, with ``exchange`` for the shared root."""
    guide = (ROOT / "INSTRUCTORS.md").read_text()
    found = re.search(r"/etc/jupyter/nbgrader_config.py`:\s*\n[ \t]*```python\n(.*?\n)[ \t]*```", guide, flags=re.S)
    assert found, "INSTRUCTORS.md lost the learner config block (/etc/jupyter/nbgrader_config.py)"
    assert SHARED_ROOT in found.group(1), f"INSTRUCTORS.md's learner config does not name {SHARED_ROOT}"
    return textwrap.dedent(found.group(1)).replace(SHARED_ROOT, str(exchange))


@dataclass
class SharedMachine:
    course: Path
    exchange: Path
    instructor_home: Path
    learner_home: Path
    chapter: str

    def _env(self, home: Path, **extra) -> dict:
        env = {k: v for k, v in os.environ.items() if k not in ("COURSE_ID", "COURSE_EXCHANGE", "JUPYTER_CONFIG_PATH")}
        scripts = str(Path(sys.executable).parent)
        return dict(env, HOME=str(home), JUPYTER_CONFIG_DIR=str(home / ".jupyter"), COURSE_DEVICE="cpu",
                    PATH=scripts + os.pathsep + env.get("PATH", ""), **extra)

    def instructor_env(self) -> dict:
        return self._env(self.instructor_home, COURSE_EXCHANGE=str(self.exchange))

    def learner_env(self) -> dict:
        return self._env(self.learner_home)

    def _run(self, args, cwd, env) -> str:
        proc = subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
        assert proc.returncode == 0, f"`{' '.join(args)}` failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        return proc.stdout + proc.stderr

    def instructor(self, *args: str) -> str:
        """Run ``python -m <args>`` as the instructor, in the course folder; its output."""
        return self._run(args, self.course, self.instructor_env())

    def learner(self, *args: str) -> str:
        """Run ``python -m <args>`` as the learner, in their home; its output."""
        return self._run(args, self.learner_home, self.learner_env())

    def fetched(self) -> Path:
        return self.learner_home / self.chapter / f"{self.chapter}.ipynb"

    def max_score(self) -> float:
        return float(sum(nbgrader_meta(c)["points"] for c in load(solution_path(self.chapter)).cells
                         if nbgrader_meta(c).get("grade")))


def set_up(tmp: Path, chapter: str = "02_devices") -> SharedMachine:
    """The machine with ``chapter`` released to the exchange and the learner on the roster."""
    machine = SharedMachine(tmp / "course", tmp / "srv-exchange", tmp / "instructor", tmp / "learner", chapter)
    for folder in (machine.course / "solutions", machine.instructor_home / ".jupyter", machine.learner_home / ".jupyter"):
        folder.mkdir(parents=True)
    machine.exchange.mkdir()
    machine.exchange.chmod(0o777)  # the administrator's step: every learner writes to inbound/
    (machine.course / "nbgrader_config.py").write_text((ROOT / "nbgrader_config.py").read_text())
    (machine.course / "solutions" / chapter).mkdir()
    (machine.course / "solutions" / chapter / f"{chapter}.ipynb").write_bytes(solution_path(chapter).read_bytes())
    (machine.learner_home / ".jupyter" / "nbgrader_config.py").write_text(learner_config(machine.exchange))
    machine.instructor("course_tools", "release", chapter, "--course", str(machine.course))
    machine.instructor("nbgrader", "db", "student", "add", LEARNER)
    machine.instructor("nbgrader", "release_assignment", chapter)
    return machine


def solve(notebook: Path, chapter: str) -> int:
    """Write the reference answers into a learner's notebook (as a learner would type them); cells changed."""
    answers = {nbgrader_meta(c)["grade_id"]: c.source for c in load(solution_path(chapter)).cells
               if nbgrader_meta(c).get("solution")}
    nb = load(notebook)
    changed = 0
    for cell in nb.cells:
        grade_id = nbgrader_meta(cell).get("grade_id")
        if nbgrader_meta(cell).get("solution") and grade_id in answers:
            cell.source = answers[grade_id]
            changed += 1
    nbformat.write(nb, str(notebook))
    return changed
