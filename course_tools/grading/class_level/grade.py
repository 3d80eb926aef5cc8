"""Grade a class: every submission in its own nbgrader process, under the caps, with a status.

Each submission runs ``nbgrader autograde <assignment> --student <id> --force``
in a separate process group, so a submission that hangs past the
whole-submission cap, or kills its kernel, stops only itself. That process runs
each notebook through the engine, ``engine.execute.LimitedExecute``, because
``nbgrader_config.py`` puts it in place of nbgrader's ``Execute``;
``require_engine`` stops grading where a course's config does not. The engine
leaves a run record per notebook (``run_record.py``); the outcome of each
submission comes from ``status.classify`` over that record, the gradebook and
nbgrader's exit code, and is stored (``outcome_store.py``, replacing any
earlier one), so grading twice gives the same table and no duplicate rows.
``jobs`` submissions are graded at once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import psutil

from course_tools.grading.engine.execute import LimitedExecute
from course_tools.grading.engine.watchdog import family
from course_tools.grading.course import Course
from course_tools.grading.class_level.scores import apply_overrides
from course_tools.grading.class_level.status import Evidence, Outcome, classify, record_findings, tamper_findings
from course_tools.grading.run_record import read_record

__all__ = ["grade", "grade_one", "forget_score", "register_assignment"]


def register_assignment(course: Course, assignment: str) -> None:
    """Record an assignment from ``solutions/`` in the gradebook, without touching ``notebooks/``.

    nbgrader can only grade an assignment it generated; the release goes to a
    throwaway folder so no learner notebook is ever written here.
    """
    from course_tools.grading.release.generate import generate_release

    with tempfile.TemporaryDirectory() as tmp:
        generate_release(Path(tmp), [assignment], root=course.root, db_url=course.db_url)


def _kill_tree(proc: subprocess.Popen) -> None:
    """Kill nbgrader and every process under it (the kernel runs in a session of its own)."""
    tree = family(proc.pid)
    for p in tree:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(tree, timeout=10)
    proc.wait()


def _run_autograde(course: Course, student: str, assignment: str, limit: float, log_path: Path) -> tuple[int | None, float | None]:
    """(exit code, None) or (None, seconds) when the whole-submission cap killed it."""
    cmd = [
        sys.executable, "-m", "nbgrader", "autograde", assignment, "--student", student, "--force",
        "--Autograde.create_student=False",
    ]
    if not course.limits().sandbox:  # the instructor's explicit opt-out (config or --no-sandbox)
        cmd.append("--GradingLimits.sandbox=False")
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=course.root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return proc.wait(timeout=limit), None
        except subprocess.TimeoutExpired:
            _kill_tree(proc)
            return None, limit


def _no_nbgrader_cells(name: str, nb) -> str:
    """A notebook with no nbgrader metadata in any cell (work copied into a new notebook): nbgrader
    cannot put the tests back (it raises a KeyError), so it is not run; say what to do instead."""
    if any(c.get("metadata", {}).get("nbgrader") for c in nb.cells):
        return ""
    return (f"{name}.ipynb has no nbgrader cell at all (the work was copied into a new notebook, or every "
            "cell's metadata was removed): nothing can tell its answers from its tests. Ask the learner to "
            f"paste the answers into the released {name}.ipynb, or do it yourself, and grade again")


def _read_notebooks(folder: Path, names: list[str]) -> tuple[dict, list[str]]:
    """Parse each expected notebook; return ({name: nb}, [problems])."""
    nbs, problems = {}, []
    for name in names:
        path = folder / f"{name}.ipynb"
        if not path.is_file():
            others = sorted(p.name for p in folder.glob("*.ipynb") if p.stem not in names)
            hint = (f"; the folder holds {', '.join(others)}: rename it to {path.name} and grade again" if others
                    else f"; put it in {folder} and grade again")
            problems.append(f"{path.name} is missing from the submission{hint}")
            continue
        try:
            nbs[name] = nbformat.read(str(path), as_version=4)
            nbformat.validate(nbs[name])
        except Exception as err:  # noqa: BLE001 - any parse or schema failure is the evidence
            kind = "not valid JSON" if "json" in type(err).__name__.lower() or "Expecting" in str(err) else "not a valid notebook"
            problems.append(f"{path.name} is {kind} ({type(err).__name__}: {str(err).splitlines()[0][:160]})")
            nbs.pop(name, None)
            continue
        stripped = _no_nbgrader_cells(name, nbs[name])
        if stripped:
            problems.append(stripped)
            nbs.pop(name)
    return nbs, problems


def grade_one(course: Course, student: str, assignment: str, roster: list[str], known: list[str]) -> Outcome:
    """Grade one submission and store its outcome."""
    limits = course.limits()
    ev = Evidence(cell_timeout=course.cell_timeout, cell_cpu=limits.cell_cpu or None,
                  grade_cell_cpu=limits.grade_cell_cpu or None, memory_mb=limits.memory_mb or None)
    if assignment not in known:
        ev.unknown.append(
            f"the course has no assignment {assignment!r} (not in the gradebook or {course.source_dir.name}/); "
            f"rename the folder to one of {', '.join(known) or 'the folders in ' + course.source_dir.name + '/'} "
            "and grade again"
        )
    if student not in roster:
        ev.unknown.append(
            f"{student!r} is not on the roster (the gradebook's students); add them with "
            f"`nbgrader db student add {student}` and grade again"
        )
    if not ev.unknown:
        with course.gradebook() as gb:
            notebooks = {nb.name: list(nb.source_cells) for nb in gb.find_assignment(assignment).notebooks}
        submitted, ev.unreadable = _read_notebooks(course.submission_dir("submitted", student, assignment),
                                                   sorted(notebooks))
        if not ev.unreadable:
            for name, nb in submitted.items():
                ev.tampered += tamper_findings(nb, notebooks[name])
            for name in notebooks:  # a record left by an earlier run must not speak for this one
                course.run_record_path(student, assignment, name).unlink(missing_ok=True)
            for attempt in range(3):  # another grading process may hold the gradebook for a moment
                ev.exit_code, ev.killed_after = _run_autograde(
                    course, student, assignment, limits.notebook_timeout, course.log_path(student, assignment)
                )
                ev.log = course.log_path(student, assignment).read_text(errors="replace")
                if ev.exit_code == 0 or "database is locked" not in ev.log:
                    break
                time.sleep(1 + attempt)
            out_dir = course.submission_dir("autograded", student, assignment)
            if ev.killed_after is not None:
                shutil.rmtree(out_dir, ignore_errors=True)  # half-written: feedback must not use it
            else:
                for name in sorted(notebooks):
                    record_findings(name, read_record(course.run_record_path(student, assignment, name)), ev)
            if ev.exit_code == 0 and ev.killed_after is None:
                with course.gradebook() as gb:
                    ev.notes += apply_overrides(course, gb, student, assignment)
                    sub = gb.find_submission(assignment, student)
                    ev.score, ev.max_score = float(sub.score), float(sub.max_score)
            else:
                with course.gradebook() as gb:
                    ev.max_score = float(gb.find_assignment(assignment).max_score)
    outcome = classify(student, assignment, ev)
    if outcome.score is None and not ev.unknown:
        forget_score(course, student, assignment)
    course.save_outcome(outcome)
    return outcome


def forget_score(course: Course, student: str, assignment: str) -> None:
    """A run with no score replaces any earlier one everywhere: the gradebook (so ``nbgrader export``
    and formgrader no longer show the old score) and the autograded notebook (so no feedback uses it)."""
    shutil.rmtree(course.submission_dir("autograded", student, assignment), ignore_errors=True)
    for attempt in range(5):  # another grading process may hold the gradebook for a moment
        try:
            with course.gradebook() as gb:
                try:
                    gb.find_submission(assignment, student)
                except Exception:  # noqa: BLE001 - nbgrader's MissingEntry: nothing stored, nothing to forget
                    return
                gb.remove_submission(assignment, student)
            return
        except Exception as err:  # noqa: BLE001 - sqlite "database is locked"
            if "locked" not in str(err) or attempt == 4:
                raise
            time.sleep(1 + attempt)


def _again_alone(course: Course, outcomes: list[Outcome], roster: list[str], known: list[str],
                 progress: bool) -> list[Outcome]:
    """Grade once more, alone, after the rest, each submission stopped by a limit the machine's load could have
    made it reach (the whole-submission wall-clock cap, a stall; not a spent CPU budget, which load hardly
    changes): such a limit, reached because of other submissions graded beside it or another program, is not
    scored. The second outcome is the one kept; an answer that really hangs is stopped again, in bounded time."""
    from tqdm.auto import tqdm

    again = [i for i, o in enumerate(outcomes) if o.load_sensitive]
    for i in tqdm(again, desc="timed out: grading again, alone", unit="submission", disable=not progress or not again):
        outcomes[i] = grade_one(course, outcomes[i].student, outcomes[i].assignment, roster, known)
    return outcomes


def require_engine(course: Course) -> None:
    """Stop before grading anything when the course's ``nbgrader_config.py`` does not run notebooks through the
    engine: nbgrader's plain ``Execute`` has none of the caps, no sandbox and no run record."""
    steps = course.config.get("Autograde", {}).get("autograde_preprocessors") or []
    if not any(isinstance(step, type) and issubclass(step, LimitedExecute) for step in steps):
        raise SystemExit("grading stopped: nbgrader_config.py does not put LimitedExecute in place of nbgrader's "
                         "Execute (c.Autograde.autograde_preprocessors), so learner code would run without the "
                         "caps or the sandbox. Copy those lines from the course's own nbgrader_config.py.")


def require_sandbox(course: Course) -> None:
    """Stop before grading anything when the configuration asks for the sandbox and none can run here, or when
    the sandbox would not import the grader's own ``helpers`` (every submission would end "crashed")."""
    from course_tools.grading.engine.sandbox import INSTALL_HINT, helpers_in_sandbox, sandbox_problem

    if not course.limits().sandbox:
        return
    if sandbox_problem():
        raise SystemExit(f"grading stopped: {sandbox_problem()}, and learner code only runs in the sandbox "
                         f"(course_tools/grading/engine/sandbox.py). To fix: {INSTALL_HINT}.")
    problem = helpers_in_sandbox(course.root)
    if problem:
        raise SystemExit(f"grading stopped before the first submission: {problem}.")


def grade(
    course: Course, assignment: str | None = None, student: str | None = None, progress: bool = True, jobs: int = 1
) -> list[Outcome]:
    """Grade every submission in ``submitted/`` (or one assignment, or one student's).

    ``jobs`` submissions run at once, each in its own process (the gradebook
    is SQLite: a run that finds it locked is retried).
    """
    from concurrent.futures import ThreadPoolExecutor

    from tqdm.auto import tqdm

    todo = course.submissions(assignment, student)
    if todo:
        require_engine(course)
        require_sandbox(course)
    known = set(course.graded_assignments())
    for name in sorted({a for _, a in todo} - known):
        if name in course.source_assignments():
            register_assignment(course, name)
            known.add(name)
    roster = course.roster()
    outcomes = []
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(grade_one, course, who, what, roster, sorted(known)) for who, what in todo]
        for future in tqdm(futures, desc="grading", unit="submission", disable=not progress):
            outcomes.append(future.result())
    outcomes = _again_alone(course, outcomes, roster, sorted(known), progress)
    elapsed = time.perf_counter() - start
    if todo:  # the rate is printed with or without the progress bar (INSTRUCTORS.md, "Speed")
        print(f"graded {len(todo)} submissions in {elapsed:.0f} s ({60 * len(todo) / elapsed:.1f} per minute)", file=sys.stderr)
    return outcomes
