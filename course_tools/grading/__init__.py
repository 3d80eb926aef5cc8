"""nbgrader glue for instructors: safe release, class grading, feedback, export.

Not a technique: nothing in a chapter imports it. ``nbgrader_config.py`` loads
its preprocessors, and ``python -m course_tools release|grade|feedback|export``
drives it.
"""

import os
import sys
from pathlib import Path


def ensure_tools_on_path() -> None:
    """Put this Python's scripts folder first on PATH.

    nbgrader's gradebook shells out to the ``alembic`` command by name, which
    fails with FileNotFoundError when the virtual environment is not
    activated (``.venv/bin/python -m ...``, a Makefile, CI).
    """
    scripts = str(Path(sys.executable).parent)
    if os.environ.get("PATH", "").split(os.pathsep)[0] != scripts:
        os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")
