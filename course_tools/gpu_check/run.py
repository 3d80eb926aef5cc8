"""``make gpu-check`` (``python -m course_tools gpu-check``): check the whole course on a real GPU in one call.

On a machine without CUDA it refuses at once and says why. ``--dry-run`` lists every step with its
command, environment and time limit, on any machine. Otherwise, within :data:`BUDGET_S` seconds:

1. install the carried wheels (``make gpu-wheelhouse``) and the project with ``--no-deps``, over the
   machine's own torch;
2. ``python -m helpers env``;
3. each chapter's GPU measurements (``course_tools.gpu_check.measure``), one process per chapter;
4. ``python -m helpers bench``;
5. the ``gpu``-marked tests;
6. every solution notebook under nbval with ``COURSE_DEVICE=cuda``.

Then it writes ``results/<gpu>/<chapter>.json`` for every chapter ``helpers.results.FIGURES`` lists:
the figures, the outcome of that chapter's notebook and the GPU tests, and the provenance (device,
driver, torch and CUDA versions, Python, date, command, course commit). Each step's whole output is in
``gpu-check-logs/``; a failed step prints its tail and the check goes on to the next, so one broken chapter
does not hide the rest. Exit status 0 only when every step passed.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from helpers import results
from course_tools.gpu_check.measure import MEASURES
from course_tools.paths import package_course_root

ROOT = package_course_root()
BUDGET_S = 480  # the "everything finishes in at most 8 minutes"
SITE = Path(tempfile.gettempdir()) / "gpu-check-site"


@dataclass
class Step:
    """One command of the check: what it is, how it runs, how long it may take."""

    name: str
    argv: list[str]
    timeout_s: int
    env: dict[str, str] = field(default_factory=dict)
    chapter: str | None = None  # a measurement step: its JSON lands in ``<work>/<chapter>.json``

    @property
    def log_name(self) -> str:
        """Its log's file name in the logs folder."""
        return self.name.replace(" ", "_").replace("/", "_") + ".log"

    def line(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        return f"{env + ' ' if env else ''}{shlex.join(self.argv)}"


def gpu_test_files(root: Path = ROOT) -> list[str]:
    """The test files that hold ``@pytest.mark.gpu`` tests (the others import what the GPU machine lacks)."""
    return sorted(str(p.relative_to(root)) for p in (root / "tests").rglob("test_*.py")
                  if "@pytest.mark.gpu" in p.read_text() and p.name != "test_skip_policy.py")


def plan(python: str, wheelhouse: Path, work: Path, root: Path = ROOT, device: str = "cuda") -> list[Step]:
    """Every step of the check, in order (``device="cpu"`` only for a rehearsal)."""
    cuda = {"COURSE_DEVICE": device, "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1"}
    pytest = [python, "-m", "pytest", "-o", "addopts=", "-o", "junit_family=xunit1", "-p", "no:cacheprovider", "-q",
              "-rfE"]
    steps = []
    wheels = sorted(wheelhouse.glob("*.whl")) if wheelhouse.is_dir() else []
    if wheels:
        steps.append(Step("install carried wheels", [python, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                                                     "--no-compile", "--upgrade", "--target", str(SITE),
                                                     *map(str, wheels)], 120))
    steps.append(Step("install the course (--no-deps)", [python, "-m", "pip", "install", "-q", "--no-index",
                                                         "--no-deps", "--no-build-isolation", "-e", str(root)], 120))
    steps.append(Step("env", [python, "-m", "helpers", "env"], 60))
    steps += [Step(f"measure {ch}", [python, "-m", "course_tools.gpu_check.measure", ch, str(work / f"{ch}.json"), device],
                   90, cuda, chapter=ch) for ch in MEASURES]
    steps.append(Step("bench", [python, "-m", "helpers", "bench", "64", "256", "1024", "4096"], 90, cuda))
    steps.append(Step("gpu-marked tests", [*pytest, "-m", "gpu", f"--junitxml={work / 'gpu.xml'}",
                                           *gpu_test_files(root)], 120, cuda))
    steps.append(Step("solutions under nbval", [*pytest, "--nbval", "--nbval-current-env", "--nbval-cell-timeout=240",
                                                # a crashed worker ends the step (pytest-xdist 3.8 can hang after
                                                # replacing one under loadfile: docs/STACK_NOTES.md)
                                                "-n", "4", "--dist", "loadfile", "--max-worker-restart=0",
                                                f"--junitxml={work / 'nbval.xml'}",
                                                "solutions"], 300, cuda))
    return steps


def refusal() -> str | None:
    """Why this machine cannot run the check, or None when it can."""
    try:
        import torch
    except ImportError:
        return "torch is not installed for this Python; the check runs over the GPU machine's own torch"
    if not torch.cuda.is_available():
        built = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU only"
        return (f"no CUDA GPU here: torch {torch.__version__} ({built}) sees none, so there is nothing to check "
                "on a GPU and no GPU figure to store. Run it on a machine with an NVIDIA GPU; `--dry-run` lists "
                "what it would run.")
    return None


def provenance(command: str) -> dict[str, str]:
    """Where the figures come from: device, driver, versions, date, command and the course's commit."""
    import torch

    from helpers.env_report import describe_machine

    report = describe_machine()
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU rehearsal ({report.cpu_model})"
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return {
        "device": device,
        "driver": report.driver or "unknown",
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "unknown",
        "python": platform.python_version(),
        "cpu": report.cpu_model,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "course_commit": commit.stdout.strip() or "unknown",
    }


def junit_outcomes(path: Path) -> dict[str, str]:
    """``{file: "passed 3" | "passed 2, skipped 1" | "failed 1 of 3"}`` from a junit XML report (empty if missing)."""
    if not path.exists():
        return {}
    per_file: dict[str, list[str]] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("file") or case.get("classname") or ""
        tags = {child.tag for child in case}
        status = "failed" if tags & {"failure", "error"} else "skipped" if "skipped" in tags else "passed"
        per_file.setdefault(name, []).append(status)
    outcomes = {}
    for f, statuses in per_file.items():
        failed = statuses.count("failed")
        outcomes[f] = (f"failed {failed} of {len(statuses)}" if failed else
                       ", ".join(f"{s} {statuses.count(s)}" for s in ("passed", "skipped") if s in statuses))
    return outcomes


def run_step(step: Step, logs: Path, env: dict[str, str], deadline: float) -> tuple[bool, str]:
    """Run one step with its limit (cut to what the budget has left); its output goes to ``logs``."""
    limit = max(1, min(step.timeout_s, int(deadline - time.monotonic())))
    log = logs / step.log_name
    try:
        with log.open("w") as out:
            done = subprocess.run(step.argv, cwd=ROOT, env={**env, **step.env}, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=limit)
        ok, why = done.returncode == 0, f"exit {done.returncode}"
    except subprocess.TimeoutExpired:
        ok, why = False, f"stopped after {limit} s (its limit, or the {BUDGET_S} s budget)"
    return ok, why


def write_results(work: Path, out: Path, prov: dict[str, str], logs: Path) -> list[Path]:
    """One results file per chapter, from the measurements, the env and bench reports, and the test outcomes."""
    nbval = junit_outcomes(work / "nbval.xml")
    gpu_tests = junit_outcomes(work / "gpu.xml")
    texts = {("02_devices", "env_report"): logs / "env.log", ("01_why_gpus", "bench_report"): logs / "bench.log"}
    written = []
    for chapter, spec in results.FIGURES.items():
        measured = json.loads((work / f"{chapter}.json").read_text()) if (work / f"{chapter}.json").exists() else {}
        figures = dict(measured.get("figures", {}))
        skipped = dict(measured.get("skipped", {}))
        for (ch, key), path in texts.items():
            if ch == chapter and path.exists():
                figures[key] = path.read_text()
        for key in spec:
            if key not in figures:
                skipped.setdefault(key, "its step failed or did not run; see the check's logs")
        checks = {"notebook": next((v for f, v in nbval.items() if chapter in f), "not run"), "gpu_tests": gpu_tests}
        written.append(results.write(chapter, figures, prov, out, skipped, extra={"checks": checks}))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_tools gpu-check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="list what it would run, and run nothing")
    parser.add_argument("--out", type=Path, default=ROOT / "results", help="where results/<gpu>/<chapter>.json go")
    parser.add_argument("--wheelhouse", type=Path, default=ROOT / ".whl", help="wheels from `make gpu-wheelhouse`")
    parser.add_argument("--logs", type=Path, default=ROOT / "gpu-check-logs", help="each step's whole output")
    parser.add_argument("--python", default=sys.executable, help="the Python (with CUDA torch) to check with")
    parser.add_argument("--rehearse", action="store_true",
                        help="run every step on the CPU, to try the check itself; needs --out outside results/, "
                             "and what it writes is labelled a CPU rehearsal (the course refuses to show it)")
    args = parser.parse_args(argv)
    if args.rehearse and args.out.resolve() == (ROOT / "results").resolve():
        parser.error("--rehearse writes CPU figures: give --out a scratch folder, never results/")
    command = os.environ.get("GPU_CHECK_COMMAND", "python -m course_tools gpu-check")
    work = Path("<scratch>") if args.dry_run else Path(tempfile.mkdtemp(prefix="gpu-check-"))
    steps = plan(args.python, args.wheelhouse, work, device="cpu" if args.rehearse else "cuda")
    if args.dry_run:
        print(f"`{command}` would run, within {BUDGET_S} s in all:")
        for i, step in enumerate(steps, 1):
            print(f"{i:2d}. {step.name} (at most {step.timeout_s} s)\n      {step.line()}")
        print(f"then write {args.out}/<gpu>/<chapter>.json for {', '.join(results.FIGURES)}, with provenance")
        if why := refusal():
            print(f"\n(and here it would refuse: {why})")
        return 0
    if (why := refusal()) and not args.rehearse:
        print(f"gpu-check: refused: {why}", file=sys.stderr)
        return 2
    return execute(steps, work, args.out, args.logs, command)


def execute(steps: list[Step], work: Path, out: Path, logs: Path, command: str) -> int:
    """Run the steps in order within the budget, then store the results; print a line per step."""
    deadline = time.monotonic() + BUDGET_S
    logs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(SITE), os.environ.get("PYTHONPATH")) if p),
           "COURSE_LANG": "en"}  # the stored reports (env, bench) are English whatever the GPU machine's locale
    failed = []
    for i, step in enumerate(steps, 1):
        start = time.monotonic()
        print(f"[{i}/{len(steps)}] {step.name} ...", end=" ", flush=True)
        ok, why = run_step(step, logs, env, deadline)
        print(f"{'ok' if ok else 'FAILED (' + why + ')'} in {time.monotonic() - start:.0f} s", flush=True)
        if not ok:
            failed.append(step.name)
            print("      " + "\n      ".join((logs / step.log_name).read_text().splitlines()[-15:]), flush=True)
    written = write_results(work, out, provenance(command), logs)
    print(f"wrote {len(written)} results files under {out}/{written[0].parent.name}/" if written else "wrote nothing")
    if failed:
        print(f"gpu-check: {len(failed)} step(s) failed: {', '.join(failed)}; logs in {logs}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
