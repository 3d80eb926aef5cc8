"""The course from a terminal: ``python -m helpers COMMAND``.

    env        what this machine offers the course (also the install smoke test)
    release    regenerate notebooks/ from solutions/
    grade      grade submitted/ and print a status table
    feedback   HTML feedback for graded submissions
    export     grades.csv with a status column
"""

from __future__ import annotations

import sys

GRADING_COMMANDS = ("release", "grade", "feedback", "export")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv else "help"
    if command == "env":
        from helpers.device import DeviceUnavailableError
        from helpers.machine import format_report

        try:
            print(format_report())
        except DeviceUnavailableError as err:  # pragma: no cover - format_report guards this itself
            print(f"error: {err}", file=sys.stderr)
            return 2
        return 0
    if command in GRADING_COMMANDS:
        from helpers.grading.cli import main as grading_main

        return grading_main(argv)
    print(__doc__.strip())
    return 0 if command in ("help", "-h", "--help") else 2


if __name__ == "__main__":
    sys.exit(main())
