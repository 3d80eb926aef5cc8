"""Generate the learner notebooks (``notebooks/``) from the instructor notebooks (``solutions/``).

``generate_release`` is the one place that runs nbgrader's ``generate_assignment``:
``make release`` uses it, and the tests use it to prove that the committed
``notebooks/`` equals a fresh release byte for byte.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from helpers.grading import ensure_tools_on_path

__all__ = ["COURSE_ROOT", "assignments", "generate_release"]

#: The course root: the folder holding nbgrader_config.py, solutions/ and notebooks/.
COURSE_ROOT = Path(__file__).resolve().parents[2]


def assignments(root: Path = COURSE_ROOT) -> list[str]:
    """Assignment folders in ``solutions/`` (``NN_topic``), in course order."""
    source = root / "solutions"
    return sorted(p.name for p in source.iterdir() if p.is_dir() and re.match(r"^\d\d_", p.name))


def generate_release(
    dest: Path,
    names: list[str] | None = None,
    root: Path = COURSE_ROOT,
    db_url: str | None = None,
) -> list[Path]:
    """Run nbgrader's generate_assignment for each assignment into ``dest``.

    ``db_url`` chooses the gradebook that records the release (autograding
    needs it). ``None`` uses the course's own ``gradebook.db``; tests pass a
    throwaway one. Returns the generated notebooks.
    """
    ensure_tools_on_path()
    dest = Path(dest).resolve()
    names = names if names is not None else assignments(root)
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    written: list[Path] = []
    for name in names:
        cmd = [
            sys.executable, "-m", "nbgrader", "generate_assignment", name, "--force", "--log-level=WARN",
            f"--CourseDirectory.root={root}",
            f"--CourseDirectory.release_directory={dest}",
        ]
        if db_url:
            cmd.append(f"--CourseDirectory.db_url={db_url}")
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"nbgrader generate_assignment {name} failed:\n{proc.stdout}\n{proc.stderr}")
        written += sorted((dest / name).glob("*.ipynb"))
    return written
