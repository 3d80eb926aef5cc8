"""The course from a terminal, for a learner: ``python -m helpers COMMAND`` (:data:`USAGE` lists the commands).

The usage lives in :data:`USAGE` rather than in this docstring so that it goes through ``_``: the Korean
edition's learner reads it in Korean.
"""

from __future__ import annotations

import sys

from helpers.i18n import N_, _

USAGE = N_("""The course from a terminal, for a learner: ``python -m helpers COMMAND``.

    env        what this machine offers the course (also the install smoke test)
    bench      matrix-product throughput on every device this machine has (chapter 01's sweep)
    bench --vs-timer [ROUNDS]   the course timer against torch.utils.benchmark.Timer (1024x1024)

The instructor's and maintainer's commands (release, grade, feedback, export, override, handout, colab,
gpu-check, gpu-wheelhouse) are ``python -m course_tools COMMAND``, in the full repository.""")

BENCH_USAGE = N_("""usage: python -m helpers bench [SIZE ...]          matrix-product sweep on every device (default sizes 64 ... 2048)
       python -m helpers bench --vs-timer [ROUNDS]  the course timer against torch.utils.benchmark.Timer""")


def bench(args: list[str]) -> int:
    """Print chapter 01's matrix-product sweep for this machine: measured, never typed in."""
    import torch

    from helpers.benchmark import matmul_work, sweep
    from helpers.env_report import describe_machine

    if args[:1] == ["--vs-timer"]:
        from helpers.benchmark import compare_with_torch_timer, format_seconds

        rounds = int(args[1]) if len(args) > 1 else 5
        table = compare_with_torch_timer(rounds=rounds)
        print(_("1024x1024 float32 matrix product on the CPU, {threads} threads, torch {version}").format(
            threads=table[0]["num_threads"], version=torch.__version__))
        for row in table:
            print(_("round {round}: Timer.blocked_autorange {timer}, time_callable {ours}, difference "
                    "{difference:+.2%}").format(round=row["round"], timer=format_seconds(row["torch_timer"]),
                                                ours=format_seconds(row["time_callable"]),
                                                difference=row["difference"]))
        return 0
    if args[:1] in (["--help"], ["-h"]):
        print(_(BENCH_USAGE))
        return 0
    try:
        sizes = [int(a) for a in args] or [64, 128, 256, 512, 1024, 2048]
    except ValueError:
        print(_("error: sizes must be whole numbers, got {sizes!r}").format(sizes=" ".join(args)) + "\n\n"
              + _(BENCH_USAGE), file=sys.stderr)
        return 2

    def make(n: int, device: torch.device):
        a = torch.randn(n, n, device=device)
        b = torch.randn(n, n, device=device)
        return lambda: a @ b

    report = describe_machine()
    gpus = "".join(f"; GPU {g.index}: {g.name}" for g in report.gpus)
    print(_("matrix product, float32; torch {version} ({build}), {cpu}, {threads} CPU threads").format(
        version=report.torch_version, build=report.build, cpu=report.cpu_model, threads=report.torch_threads) + gpus)
    print(sweep(make, sizes, work=matmul_work, label="matmul"))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv else "help"
    if command == "env":
        from helpers.device import DeviceUnavailableError
        from helpers.env_report import format_report

        try:
            print(format_report())
        except DeviceUnavailableError as err:  # pragma: no cover - format_report guards this itself
            print(_("error: {error}").format(error=err), file=sys.stderr)
            return 2
        return 0
    if command == "bench":
        return bench(argv[1:])
    print(_(USAGE))
    return 0 if command in ("help", "-h", "--help") else 2


if __name__ == "__main__":
    sys.exit(main())
