"""Where nbgrader's exchange is for this course: the course id and the exchange root.

The exchange is the folder that ``nbgrader release_assignment``, ``fetch_assignment``,
``submit`` and ``collect`` (and JupyterLab's Assignments tab) pass notebooks through.
nbgrader reads both settings only from a config file, never from the ``jupyter lab``
command line, so ``nbgrader_config.py`` calls :func:`exchange_settings` and a course
server, or a test, overrides them with environment variables:

- ``COURSE_ID``: the course id (default ``gpu-pytorch``);
- ``COURSE_EXCHANGE``: the exchange root. A shared machine sets a world-writable folder
  that its administrator made (``/srv/nbgrader/exchange``, see INSTRUCTORS.md); it is
  used as given and never created here, because only its creator can give it the
  permissions every learner needs.

Without ``COURSE_EXCHANGE`` the root is ``exchange/`` inside the course folder, created
here: a self-learner needs nothing world-writable, and the Assignments tab lists an
empty exchange instead of answering "The exchange directory does not exist".
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DEFAULT_COURSE_ID", "exchange_settings"]

DEFAULT_COURSE_ID = "gpu-pytorch"


def exchange_settings(course_root: str | os.PathLike) -> tuple[str, Path]:
    """``(course id, exchange root)`` for the course in ``course_root``, from the environment or the defaults."""
    course_id = os.environ.get("COURSE_ID", "").strip() or DEFAULT_COURSE_ID
    given = os.environ.get("COURSE_EXCHANGE", "").strip()
    if given:
        return course_id, Path(given).expanduser().absolute()
    root = Path(course_root).absolute() / "exchange"
    root.mkdir(exist_ok=True)
    return course_id, root
