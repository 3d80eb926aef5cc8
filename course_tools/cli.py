"""``python -m course_tools COMMAND``: the instructor's and maintainer's commands (INSTRUCTORS.md, README).

    release  [--force] [--rebuild]               regenerate notebooks/ from solutions/; keeps edited notebooks
    grade    [--assignment A] [--student S] [--jobs N] [--no-sandbox]
                                                 grade submitted/, print student x assignment with a status
    feedback [--assignment A] [--student S]      HTML feedback in feedback/, hidden tests checked absent
    export   [--to grades.csv]                   one CSV row per student and assignment, status beside score
    override STUDENT ASSIGNMENT CELL POINTS --why TEXT   a manual score for one grade cell, listed everywhere
    handout  --out DIR                           the student edition: DIR and DIR.zip, no solutions, no hidden tests
    colab                                        README badges and each chapter's Colab cell, from pyproject's Repository
    translate update|build|check [CHAPTER...]    the Korean edition: catalogs in step, Korean notebooks and messages built,
                                                 or what keeps them from being complete (translations/ko/, ko/)
    gpu-check [--dry-run] [--rehearse --out D]   check the whole course on a CUDA GPU; results/<gpu>/<chapter>.json
    gpu-wheelhouse [--dest D]                    download the wheels the GPU machine lacks (default .whl)
    classroom secure|check|hub ...               a shared classroom: permissions, and JupyterHub with real users
                                                 (python -m course_tools classroom --help)

Every command takes ``--course DIR`` (default: the folder with nbgrader_config.py,
from the current one upwards). Exit code: 0 when the command did its job (a
wrong or crashed submission is a result, not a failure of the command); 1 when
release kept edited notebooks or feedback found a problem; 2 for bad usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["main"]

#: the GPU check's commands keep their own argument parsers (course_tools.gpu_check)
GPU_COMMANDS = ("gpu-check", "gpu-wheelhouse")
GPU_EPILOG = ("gpu-check [--dry-run]: check the whole course on a CUDA GPU (python -m course_tools gpu-check --help); "
              "gpu-wheelhouse [--dest D]: the wheels the GPU machine lacks; "
              "classroom secure|check|hub: a shared classroom (python -m course_tools classroom --help)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m course_tools", description="Instructor and maintainer commands for this course.",
                                     epilog=GPU_EPILOG)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in [
        ("grade", "grade every submission in submitted/ and print a status table"),
        ("feedback", "write HTML feedback for graded submissions (no hidden test is shown)"),
    ]:
        p = sub.add_parser(name, help=text)
        p.add_argument("--assignment", help="only this assignment (e.g. 00_start)")
        p.add_argument("--student", help="only this student id")
        p.add_argument("--course", type=Path, help="course folder (holds nbgrader_config.py)")
        if name == "grade":
            p.add_argument("--no-progress", action="store_true", help="no progress bar")
            p.add_argument("--jobs", type=int, default=2, help="submissions graded at once (default 2)")
            p.add_argument("--no-sandbox", action="store_true",
                           help="run learner code WITHOUT the bubblewrap sandbox (only for trusted submissions)")
    p = sub.add_parser("export", help="write grades to CSV with a status column")
    p.add_argument("--to", type=Path, default=None, help="CSV path (default: grades.csv in the course folder)")
    p.add_argument("--course", type=Path)
    p = sub.add_parser("override", help="give a grade cell of one submission a manual score, with the reason")
    p.add_argument("student")
    p.add_argument("assignment")
    p.add_argument("cell", help="the grade cell's grade_id, e.g. pick-device-check")
    p.add_argument("points", type=float)
    p.add_argument("--why", required=True, help="the reason, listed beside the score in the table and the CSV")
    p.add_argument("--course", type=Path)
    p = sub.add_parser("release", help="regenerate notebooks/ from solutions/, never overwriting your edits")
    p.add_argument("assignments", nargs="*", help="only these assignments (default: all)")
    p.add_argument("--force", action="store_true", help="replace edited notebooks after backing each up beside it")
    p.add_argument("--rebuild", action="store_true",
                   help="cells added or removed after grading: drop those assignments' results (submissions stay)")
    p.add_argument("--course", type=Path)
    p = sub.add_parser("handout", help="write the student edition (notebooks and helpers; no solutions, no hidden "
                                       "tests) into a folder, and a zip of it beside the folder")
    p.add_argument("--out", type=Path, required=True, help="the folder to write (new, empty, or an earlier edition)")
    p.add_argument("--course", type=Path)
    p = sub.add_parser("colab", help="rewrite the README's Colab badges and each chapter's Colab cell in solutions/ "
                                     "from pyproject.toml's [project.urls] Repository (then run release)")
    p.add_argument("--course", type=Path)
    p = sub.add_parser("translate", help="the Korean edition: `update` the catalogs from the English, `build` the "
                                         "Korean notebooks and the helpers' compiled messages, `check` what is left")
    p.add_argument("action", choices=["update", "build", "check"])
    p.add_argument("chapters", nargs="*", help="only these chapters (default: all, and the helpers' messages)")
    p.add_argument("--course", type=Path)
    return parser


def _colab(root: Path) -> int:
    from course_tools.colab import update
    from course_tools.paths import assignments

    try:
        changed = update(root, assignments(root))
    except ValueError as err:
        print(f"colab: {err}", file=sys.stderr)
        return 2
    for path in changed:
        print(f"rewrote {path.relative_to(root)}")
    if any(p.suffix == ".ipynb" for p in changed):
        print("now run `python -m course_tools release` (then commit solutions/, notebooks/, README.md and README.ko.md)")
    return 0


def _handout(root: Path, out: Path) -> int:
    from course_tools.handout import HandoutError, build

    try:
        edition = build(root, out)
    except HandoutError as err:
        print(f"handout: {err}", file=sys.stderr)
        return 1
    print(f"student edition: {edition.folder} ({edition.files} files) and {edition.archive}; searched for "
          f"{edition.secrets} lines of answers and hidden tests: none found")
    return 0


def _gpu(command: str, argv: list[str]) -> int:
    if command == "gpu-check":
        from course_tools.gpu_check.run import main as gpu_check_main

        return gpu_check_main(argv)
    from course_tools.gpu_check.wheelhouse import build

    dest = argv[argv.index("--dest") + 1] if "--dest" in argv[:-1] else ".whl"
    return build(Path(dest))


def main(argv: list[str] | None = None) -> int:
    """Run one command; ``argv`` is what follows ``python -m course_tools``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] and argv[0] in GPU_COMMANDS:
        return _gpu(argv[0], argv[1:])
    if argv[:1] == ["classroom"]:  # its own parser: it takes no course folder (course_tools.classroom.cli)
        from course_tools.classroom.cli import main as classroom_main

        return classroom_main(argv[1:])
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)

    from course_tools.grading.course import Course
    from course_tools.paths import find_course_root

    root = find_course_root(args.course)
    if args.command == "handout":
        return _handout(root, args.out)
    if args.command == "colab":
        return _colab(root)
    if args.command == "translate":
        from course_tools.translation import run as translate

        return translate(args.action, root, args.chapters)

    if args.command == "release":
        from course_tools.grading.release.generate import ReleaseError, release

        try:
            result = release(args.assignments or None, root=root, force=args.force, rebuild=args.rebuild)
        except ReleaseError as err:
            print(f"release: {err}", file=sys.stderr)
            return 1
        for path in result.backups:
            print(f"backed up your edited notebook to {path.relative_to(root)}")
        print(f"release: {len(result.written)} file(s) written to notebooks/")
        if result.kept:
            print("kept, not overwritten (they differ from every release, so they hold someone's edits):", file=sys.stderr)
            for path in result.kept:
                print(f"  {path.relative_to(root)}", file=sys.stderr)
            print("rename or move them to get the new version, or run `python -m course_tools release --force`,"
                  " which backs each one up beside itself first. Nothing was changed (notebooks/, gradebook).",
                  file=sys.stderr)
            return 1
        for line in result.dropped:
            print(f"manual score removed with the old results (re-enter it with `python -m course_tools override`): {line}")
        for name in result.regrade:
            print(f"{name}: its tests changed after grading; run `python -m course_tools grade --assignment {name}`")
        return 0

    course = Course(root)
    if args.command == "grade":
        from course_tools.grading.class_level.grade import grade
        from course_tools.grading.class_level.report import format_table, rows

        if args.no_sandbox:
            course.config.GradingLimits.sandbox = False
        if not course.limits().sandbox:
            print("warning: the sandbox is off (--no-sandbox or c.GradingLimits.sandbox = False): learner code "
                  "runs with your rights and can read solutions/ and the gradebook", file=sys.stderr)
        todo = grade(course, args.assignment, args.student, progress=not args.no_progress, jobs=args.jobs)
        if not todo:
            print(f"nothing to grade in {course.submitted_dir} (expected submitted/<student>/<assignment>/)")
        print(format_table(rows(course, args.assignment, args.student)))
        return 0

    if args.command == "feedback":
        from course_tools.grading.class_level.feedback import feedback

        results = feedback(course, args.assignment, args.student)
        bad = 0
        for r in results:
            if r.path:
                print(f"{r.student}/{r.assignment}: {r.path.relative_to(course.root)}")
            else:
                print(f"{r.student}/{r.assignment}: {r.problem}")
                bad += "hidden test" in r.problem or "no page" in r.problem
        if not results:
            print("no graded submissions: run `python -m course_tools grade` first")
        return 1 if bad else 0

    if args.command == "override":
        from course_tools.grading.class_level.scores import override

        try:
            print(override(course, args.student, args.assignment, args.cell, args.points, args.why))
        except ValueError as err:
            print(f"override: {err}", file=sys.stderr)
            return 2
        return 0

    if args.command == "export":
        from course_tools.grading.class_level.report import write_csv

        path = args.to or course.root / "grades.csv"
        n = write_csv(course, path)
        print(f"wrote {n} rows to {path}")
        return 0
    return 2
