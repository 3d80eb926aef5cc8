"""nbgrader commands work from the course folder without an activated virtual environment."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from support.layout import ROOT


def test_nbgrader_db_works_with_the_venv_not_on_path(tmp_path):
    """The instructor guide's first step (`.venv/bin/nbgrader db student add`) on a new gradebook.

    nbgrader runs `alembic` by name; nbgrader_config.py puts the scripts folder on PATH.
    """
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path / "nbgrader_config.py")
    scripts = str(Path(sys.executable).parent)
    bare_path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != scripts)
    proc = subprocess.run([str(Path(scripts) / "nbgrader"), "db", "student", "add", "zed"], cwd=tmp_path,
                          env=dict(os.environ, PATH=bare_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "gradebook.db").exists()
