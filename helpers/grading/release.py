"""Generate the learner notebooks (``notebooks/``) from the instructor notebooks (``solutions/``).

``generate_release`` is the one place that runs nbgrader's ``generate_assignment``:
``make release`` uses it (through ``release``), and the tests use it to prove
that the committed ``notebooks/`` equals a fresh release byte for byte.

``release`` never silently overwrites a learner's work: a self-learner edits
``notebooks/`` directly. A notebook there is replaced only when it is
untouched: byte-equal to the fresh release, or to the version git has
committed (an older release nobody edited). Any other notebook is kept and
named in the refusal; ``force=True`` first copies it to
``<name>.ipynb.bak-<time>`` beside it, then replaces it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from helpers.grading import ensure_tools_on_path

__all__ = ["COURSE_ROOT", "ReleaseResult", "assignments", "generate_release", "release"]

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


@dataclass
class ReleaseResult:
    written: list[Path] = field(default_factory=list)  # replaced or new
    kept: list[Path] = field(default_factory=list)  # edited by a learner: left as they were
    backups: list[Path] = field(default_factory=list)  # force=True: copies of edited notebooks


def _committed(path: Path, root: Path) -> bytes | None:
    """The file as git has it at HEAD, or None (no git, not tracked)."""
    try:
        rel = path.resolve().relative_to(root.resolve())
        proc = subprocess.run(["git", "show", f"HEAD:{rel.as_posix()}"], cwd=root, capture_output=True, timeout=30)
    except (ValueError, OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def release(names: list[str] | None = None, root: Path = COURSE_ROOT, force: bool = False) -> ReleaseResult:
    """Regenerate ``notebooks/`` from ``solutions/``, keeping every notebook a learner edited.

    An edited notebook is kept and reported in ``result.kept`` (the caller
    says so and fails); with ``force`` it is backed up beside itself first.
    """
    root = Path(root).resolve()
    release_dir = root / "notebooks"
    result = ReleaseResult()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    with tempfile.TemporaryDirectory() as tmp:
        fresh_root = Path(tmp)
        generate_release(fresh_root, names, root=root)
        for fresh in sorted(p for p in fresh_root.rglob("*") if p.is_file()):
            target = release_dir / fresh.relative_to(fresh_root)
            new = fresh.read_bytes()
            if target.is_file():
                old = target.read_bytes()
                if old == new:
                    continue
                if target.suffix == ".ipynb" and old != _committed(target, root):
                    if not force:
                        result.kept.append(target)
                        continue
                    backup = target.with_name(f"{target.name}.bak-{stamp}")
                    shutil.copy2(target, backup)
                    result.backups.append(backup)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(new)
            result.written.append(target)
    return result
