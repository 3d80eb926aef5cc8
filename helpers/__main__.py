"""The course from a terminal: ``python -m helpers COMMAND``.

    env        what this machine offers the course (also the install smoke test)
    bench      matrix-product throughput on every device this machine has (chapter 01's sweep)
    bench --vs-timer [ROUNDS]   the course timer against torch.utils.benchmark.Timer (1024x1024)
    release    regenerate notebooks/ from solutions/
    grade      grade submitted/ and print a status table
    feedback   HTML feedback for graded submissions
    export     grades.csv with a status column
    override   a manual score for one grade cell of one submission, with the reason
    gpu-check [--dry-run]       check the whole course on a CUDA GPU; store results/<gpu>/<chapter>.json
    gpu-wheelhouse [--dest D]   download the wheels the GPU machine lacks (default .whl)
    handout    the student edition: notebooks and helpers, no solutions, no hidden tests
    colab      README badges and each chapter's Colab cell, from pyproject.toml's Repository address
"""

from __future__ import annotations

import sys

GRADING_COMMANDS = ("release", "grade", "feedback", "export", "override", "handout", "colab")
INSTRUCTOR_COMMANDS = (*GRADING_COMMANDS, "gpu-check", "gpu-wheelhouse")
#: what the student edition leaves out (helpers/grading/handout.py says why)
INSTRUCTOR_PACKAGES = ("helpers.grading", "helpers.gpu_check")
NOT_IN_EDITION = ("python -m helpers {command}: this is an instructor's command; it comes with the full course "
                  "repository (solutions/, nbgrader_config.py, helpers/grading/, helpers/gpu_check/), not with "
                  "the student edition")
BENCH_USAGE = """usage: python -m helpers bench [SIZE ...]          matrix-product sweep on every device (default sizes 64 ... 2048)
       python -m helpers bench --vs-timer [ROUNDS]  the course timer against torch.utils.benchmark.Timer"""


def bench(args: list[str]) -> int:
    """Print chapter 01's matrix-product sweep for this machine: measured, never typed in."""
    import torch

    from helpers.benchmark import matmul_work, sweep
    from helpers.machine import describe_machine

    if args[:1] == ["--vs-timer"]:
        from helpers.benchmark import compare_with_torch_timer, format_seconds

        rounds = int(args[1]) if len(args) > 1 else 5
        table = compare_with_torch_timer(rounds=rounds)
        print(f"1024x1024 float32 matrix product on the CPU, {table[0]['num_threads']} threads, torch {torch.__version__}")
        for row in table:
            print(f"round {row['round']}: Timer.blocked_autorange {format_seconds(row['torch_timer'])}, "
                  f"time_callable {format_seconds(row['time_callable'])}, difference {row['difference']:+.2%}")
        return 0
    if args[:1] in (["--help"], ["-h"]):
        print(BENCH_USAGE)
        return 0
    try:
        sizes = [int(a) for a in args] or [64, 128, 256, 512, 1024, 2048]
    except ValueError:
        print(f"error: sizes must be whole numbers, got {' '.join(args)!r}\n\n{BENCH_USAGE}", file=sys.stderr)
        return 2

    def make(n: int, device: torch.device):
        a = torch.randn(n, n, device=device)
        b = torch.randn(n, n, device=device)
        return lambda: a @ b

    report = describe_machine()
    print(f"matrix product, float32; torch {report.torch_version} ({report.build}), {report.cpu_model}, "
          f"{report.torch_threads} CPU threads" + "".join(f"; GPU {g.index}: {g.name}" for g in report.gpus))
    print(sweep(make, sizes, work=matmul_work, label="matmul"))
    return 0


def instructor(command: str, argv: list[str]) -> int:
    """An instructor's or maintainer's command (helpers.grading, helpers.gpu_check)."""
    if command == "gpu-check":
        from helpers.gpu_check.run import main as gpu_check_main

        return gpu_check_main(argv[1:])
    if command == "gpu-wheelhouse":
        from pathlib import Path

        from helpers.gpu_check.wheelhouse import build

        dest = argv[argv.index("--dest") + 1] if "--dest" in argv[:-1] else ".whl"
        return build(Path(dest))
    from helpers.grading.cli import main as grading_main

    return grading_main(argv)


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
    if command == "bench":
        return bench(argv[1:])
    if command in INSTRUCTOR_COMMANDS:
        try:
            return instructor(command, argv)
        except ModuleNotFoundError as err:
            if err.name not in INSTRUCTOR_PACKAGES:
                raise
            print(NOT_IN_EDITION.format(command=command), file=sys.stderr)
            return 2
    print(__doc__.strip())
    return 0 if command in ("help", "-h", "--help") else 2


if __name__ == "__main__":
    sys.exit(main())
