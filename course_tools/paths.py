"""Where the course is: the one course-root finder and the one assignment list of the tooling.

The course root is the folder that holds ``nbgrader_config.py`` (with ``solutions/`` and ``notebooks/``
beside it). Every command finds it the same way, from a folder upwards, so it works from any sub-folder and
from an installed (non-editable) copy of the tooling alike. Standard library only: the GPU machine imports
this without Jupyter or nbgrader.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["CONFIG_FILE", "assignments", "find_course_root", "package_course_root"]

CONFIG_FILE = "nbgrader_config.py"
#: an assignment folder: two digits, an underscore, a topic (``02_devices``)
ASSIGNMENT = re.compile(r"^\d\d_")


def find_course_root(start: Path | None = None) -> Path:
    """The nearest folder, from ``start`` (default: the current folder) upwards, that holds ``nbgrader_config.py``."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / CONFIG_FILE).is_file():
            return folder
    raise SystemExit(f"no {CONFIG_FILE} in {here} or above: run this from the course folder (or pass --course)")


def package_course_root() -> Path:
    """The course this copy of ``course_tools`` belongs to (the repository it sits in, for an editable install);
    else the one around the current folder."""
    try:
        return find_course_root(Path(__file__).parent)
    except SystemExit:
        return find_course_root()


def assignments(root: Path) -> list[str]:
    """Assignment folders in ``root/solutions/`` (``NN_topic``), in course order."""
    return sorted(p.name for p in (Path(root) / "solutions").iterdir() if p.is_dir() and ASSIGNMENT.match(p.name))
