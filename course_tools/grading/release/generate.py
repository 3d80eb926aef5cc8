"""Generate the learner notebooks (``notebooks/``) from the instructor notebooks (``solutions/``).

``generate_release`` is the one place that runs nbgrader's ``generate_assignment``:
``make release`` uses it (through ``release``), and the tests use it to prove
that the committed ``notebooks/`` equals a fresh release byte for byte.

``release`` never silently overwrites a learner's work: a self-learner edits
``notebooks/`` directly. A notebook there is replaced only when it is
untouched: byte-equal to the fresh release, or to the version git has
committed (an older release nobody edited). Any other notebook is kept and
named in the refusal; ``force=True`` first copies it to
``<name>.ipynb.bak-<time>`` beside it, then replaces it. A notebook equal to
one this command wrote before (``autograded/.grading/released.json`` keeps
their hashes) is untouched too, so a second fix before ``notebooks/`` is
committed is not refused.

Re-release after a test fix, with submissions graded already: the release
runs against a *copy* of the gradebook and replaces the real one only when
everything succeeded (nbgrader, the notebooks), so a refusal or an error
changes nothing. Changing a check's source or points is allowed (then grade
again); adding or removing a cell is refused by nbgrader while the gradebook
holds submissions, so ``release`` says so and what to do: ``--rebuild``
removes that assignment's *results* from the gradebook (the submitted files
stay), records the new cells, and lists the manual scores that are dropped
(those given with ``python -m course_tools override`` come back at the next
``grade``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from course_tools.grading import ensure_tools_on_path
from course_tools.grading.release.gradebook_changes import GradebookChangeError, prepare_gradebook
from course_tools.paths import assignments, package_course_root

__all__ = ["ReleaseError", "ReleaseResult", "assignments", "generate_release", "release"]



class ReleaseError(RuntimeError):
    """A release that did not happen: nothing was changed; the message says why and what to do."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


def _last_error(log: str) -> str:
    errors = [ln.strip() for ln in log.splitlines() if re.match(r"\s*[\w.]+(Error|Exception): ", ln)]
    return (errors[-1] if errors else (log.strip().splitlines() or ["no output"])[-1])[:400]


def generate_release(
    dest: Path,
    names: list[str] | None = None,
    root: Path | None = None,
    db_url: str | None = None,
) -> list[Path]:
    """Run nbgrader's generate_assignment for each assignment into ``dest``.

    ``db_url`` chooses the gradebook that records the release (autograding
    needs it). ``None`` uses the course's own ``gradebook.db``; tests pass a
    throwaway one. Returns the generated notebooks.
    """
    ensure_tools_on_path()
    root = Path(root) if root else package_course_root()
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
            raise ReleaseError(f"nbgrader generate_assignment {name} failed: {_last_error(proc.stdout + proc.stderr)}; "
                               f"run `nbgrader generate_assignment {name} --force` to see the whole error",
                               log=proc.stdout + proc.stderr)
        written += sorted((dest / name).glob("*.ipynb"))
    return written


@dataclass
class ReleaseResult:
    written: list[Path] = field(default_factory=list)  # replaced or new
    kept: list[Path] = field(default_factory=list)  # edited by a learner: left as they were
    backups: list[Path] = field(default_factory=list)  # force=True: copies of edited notebooks
    regrade: list[str] = field(default_factory=list)  # assignments whose graded submissions need `grade` again
    dropped: list[str] = field(default_factory=list)  # manual scores removed by --rebuild


def _committed(path: Path, root: Path) -> bytes | None:
    """The file as git has it at HEAD, or None (no git, not tracked)."""
    try:
        rel = path.resolve().relative_to(root.resolve())
        # "./": relative to the course root, which may be a folder of the repository (the Korean course, ko/)
        proc = subprocess.run(["git", "show", f"HEAD:./{rel.as_posix()}"], cwd=root, capture_output=True, timeout=30)
    except (ValueError, OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class _Manifest:
    """Hashes of every notebook ``release`` wrote, per path: such a notebook holds nobody's edits."""

    def __init__(self, root: Path):
        from course_tools.grading.course import Course

        self.path = Course(root).records_dir / "released.json"
        self.data: dict[str, list[str]] = json.loads(self.path.read_text()) if self.path.is_file() else {}

    def knows(self, key: str, data: bytes) -> bool:
        return _sha(data) in self.data.get(key, [])

    def add(self, key: str, data: bytes) -> None:
        self.data.setdefault(key, [])
        if _sha(data) not in self.data[key]:
            self.data[key] = self.data[key][-49:] + [_sha(data)]

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.data, indent=1, sort_keys=True))


def _untouched(target: Path, root: Path, manifest: _Manifest, key: str) -> bool:
    old = target.read_bytes()
    return target.suffix != ".ipynb" or manifest.knows(key, old) or old == _committed(target, root)


def release(names: list[str] | None = None, root: Path | None = None, force: bool = False,
            rebuild: bool = False) -> ReleaseResult:
    """Regenerate ``notebooks/`` from ``solutions/``, keeping every notebook a learner edited.

    An edited notebook is kept and reported in ``result.kept`` (the caller
    says so and fails; the gradebook is not changed); with ``force`` it is
    backed up beside itself first. Raises ReleaseError, changing nothing, when
    nbgrader fails or cells were added or removed in an assignment with
    submissions (unless ``rebuild``).
    """
    root = Path(root).resolve() if root else package_course_root()
    names = names if names is not None else assignments(root)
    release_dir = root / "notebooks"
    result = ReleaseResult()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    manifest = _Manifest(root)
    with tempfile.TemporaryDirectory() as tmp:
        fresh_root, db_copy = Path(tmp) / "release", Path(tmp) / "gradebook.db"
        try:
            real_db = prepare_gradebook(root, names, db_copy, rebuild, result)
        except GradebookChangeError as err:
            raise ReleaseError(str(err)) from err
        generate_release(fresh_root, names, root=root, db_url=f"sqlite:///{db_copy}")
        planned = []
        for fresh in sorted(p for p in fresh_root.rglob("*") if p.is_file()):
            target = release_dir / fresh.relative_to(fresh_root)
            key, new = fresh.relative_to(fresh_root).as_posix(), fresh.read_bytes()
            if target.is_file() and target.read_bytes() == new:
                manifest.add(key, new)
                continue
            if target.is_file() and not _untouched(target, root, manifest, key):
                if not force:
                    result.kept.append(target)
                    continue
                planned.append((target, new, key, True))
            else:
                planned.append((target, new, key, False))
        if result.kept:
            return result  # refused: neither notebooks/ nor the gradebook changed
        for target, new, key, backup in planned:
            if backup:
                copy = target.with_name(f"{target.name}.bak-{stamp}")
                shutil.copy2(target, copy)
                result.backups.append(copy)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(new)
            manifest.add(key, new)
            result.written.append(target)
        if db_copy.is_file():  # the whole release succeeded: now the gradebook changes, at once
            staged = real_db.with_name(real_db.name + ".release-tmp")
            shutil.copy2(db_copy, staged)
            os.replace(staged, real_db)
        manifest.save()
    return result
