"""``python -m course_tools classroom secure|check|hub``: set up, check and serve a shared classroom.

    secure --exchange DIR --instructor LOGIN --course ID=DIR [--course ID=DIR] --learners LOGIN...
           [--graders-group GROUP]       as root: the sticky exchange root, the course ids' exchange folders
                                         made by the instructor, the private course folders and homes
    check  (the same arguments) [--also PATH...]
                                         what is not as `secure` makes it, and every solution a learner can
                                         read on the course paths (exposure.py); exit 1 if anything
    hub    --settings FILE [--dry-run|--check]   start JupyterHub for the class (course_tools/classroom/hub.py);
                                         --dry-run prints the generated config instead; --check only searches
                                         what learners would be given for solutions they can read
    z2jh   --settings FILE [--out F]     Zero to JupyterHub values for the class (Kubernetes), checked
                                         against the chart's schema (course_tools/classroom/z2jh.py)

Exit codes: 0 done (check: nothing wrong), 1 check found problems, 2 bad usage (not root, unknown user).
"""

from __future__ import annotations

import argparse
import os
import pwd
import sys
from pathlib import Path

from course_tools.classroom import exposure, permissions

__all__ = ["main"]


def _course(text: str) -> tuple[str, Path]:
    course_id, sep, folder = text.partition("=")
    if not sep or not course_id or not folder:
        raise argparse.ArgumentTypeError(f"expected ID=DIR (e.g. gpu-pytorch=/home/teacher/course), got {text!r}")
    return course_id, Path(folder).absolute()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m course_tools classroom",
                                     description="A shared classroom: permissions and a JupyterHub with real users.")
    sub = parser.add_subparsers(dest="action", required=True)
    for name, text in [("secure", "apply the classroom's permissions (as root)"),
                       ("check", "list what is not as `secure` makes it")]:
        p = sub.add_parser(name, help=text)
        p.add_argument("--exchange", type=Path, required=True, help="the exchange root (e.g. /srv/nbgrader/exchange)")
        p.add_argument("--instructor", required=True, help="the instructor's login (owns the course folders)")
        p.add_argument("--course", type=_course, action="append", required=True, metavar="ID=DIR",
                       help="a course id and its course folder; repeat for the Korean edition's id")
        p.add_argument("--learners", nargs="*", default=[], metavar="LOGIN", help="the learners' logins")
        p.add_argument("--graders-group", help="a Unix group of teaching assistants who may read the course folders")
        if name == "check":
            p.add_argument("--also", type=Path, action="append", default=[], metavar="PATH",
                           help="another folder learners' servers use (the learners' environment or edition): "
                                "searched for solutions they can read, like the exchange and the course folders")
    p = sub.add_parser("hub", help="start JupyterHub for the class")
    p.add_argument("--settings", type=Path, required=True, help="the class's settings (JSON; see hub.py)")
    p.add_argument("--dry-run", action="store_true", help="print the generated jupyterhub_config.py and stop")
    p.add_argument("--check", action="store_true", help="as root: write the learners' files, search what learners "
                   "would be given for solutions they can read, and stop (exit 1 on one)")
    p = sub.add_parser("z2jh", help="Zero to JupyterHub values for the class, checked against the chart's schema")
    p.add_argument("--settings", type=Path, required=True, help="the class's settings (JSON; see hub.py)")
    p.add_argument("--out", type=Path, help="write the values here (default: print them)")
    return parser


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.action == "hub":
        from course_tools.classroom import hub

        return hub.main(args.settings, dry_run=args.dry_run, check_only=args.check)
    if args.action == "z2jh":
        from course_tools.classroom import z2jh

        return z2jh.main(args.settings, args.out)
    try:
        for login in [args.instructor, *args.learners]:
            pwd.getpwnam(login)
    except KeyError as err:
        print(f"classroom: no such user {err.args[0]}: create the accounts first (useradd)", file=sys.stderr)
        return 2
    rules = permissions.plan(args.exchange.absolute(), dict(args.course), args.instructor, args.learners,
                             args.graders_group)
    if args.action == "check":
        found = permissions.problems(rules) + exposure.exposed_solutions(args.exchange.absolute(), dict(args.course),
                                                                         args.learners, args.also)
        print("\n".join(found) if found else f"classroom: all {len(rules)} paths are as `secure` makes them, and "
                                               "no solution on the course paths is readable by a learner")
        return 1 if found else 0
    if os.geteuid() != 0:
        print("classroom secure: run it as root (it changes owners)", file=sys.stderr)
        return 2
    for line in permissions.apply(rules) or ["nothing to change"]:
        print(line)
    print(f"\nnow give learners' servers umask {permissions.LEARNER_UMASK:03o} (the hub does: classroom hub)")
    return 0
