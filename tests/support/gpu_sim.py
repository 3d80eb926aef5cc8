"""``make gpu-sim``: every chapter and every ``measure_*`` on a simulated H100 and T4, and what a GPU should print.

The simulated GPU is :mod:`support.fake_cuda`'s machine with a :mod:`support.gpu_model` profile: fake CUDA
tensors on GPU-like time. A chapter runs cell by cell (:func:`support.fake_cuda.run_cells`, its timers
unbriefed); a ``measure_*`` as ``make gpu-check`` calls it. Each run happens in a fresh Python
(:func:`apart`), as the fake-CUDA check does, and comes back as data; the ``*_problems`` functions then say what
a real GPU would have printed differently ("no crossover", "too few repeats"), and the tests fail on any.

Planted regressions (:data:`PLANTS`) prove the check can fail: ``w1_reverted`` puts torch's own block choice
back into ``bench.time_callable`` (review 3, W1), ``free_sync`` makes the simulated synchronize free again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from support.layout import ROOT

__all__ = ["ALLOWED_FEW_REPEATS", "CHAPTER_EXPECTATIONS", "PLANTS", "apart", "chapter_problems", "ladder_problems",
           "measure_problems", "model_problems"]

#: Planted regressions: name -> what it breaks (for the messages)
PLANTS = {
    "w1_reverted": "bench.time_callable measures with torch's blocked_autorange again (review 3, W1)",
    "free_sync": "the simulated synchronize costs nothing again",
}

#: Cells whose "too few repeats" is what a real GPU prints too, and why (cell id -> reason).
ALLOWED_FEW_REPEATS = {
    "41411f7b": "chapter 01 shows torch's own Timer.blocked_autorange, which on a GPU measures one block (W1): "
                "the cell says so",
}

#: What a GPU should print, per chapter: (cell id, profile or None for both, a regular expression its output
#: must match, what it means). Only what the timing model can say (docs/STACK_NOTES.md, "The simulated GPU").
CHAPTER_EXPECTATIONS: dict[str, list[tuple[str, str | None, str, str]]] = {
    "01_why_gpus": [
        ("c009", None, r"cuda:0: smallest work .*; peak [0-9.]+ TFLOP/s", "a peak for the GPU"),
        ("c009", None, r"crossover: n=\d+", "a crossover"),
        ("c015", None, r"without synchronising is [0-9.]+x faster than with synchronising", "the missing sync seen"),
        ("c011", None, r"it is memory-bound", "the add is memory-bound"),
    ],
    "05_mixed_precision": [
        ("c043", "H100", r"bf16 is [0-9.]+x faster than fp32", "bf16 autocast beats fp32 beyond the noise"),
        ("c043", "T4", r"fp16\+scaler is [0-9.]+x faster than fp32", "fp16 autocast beats fp32 beyond the noise"),
        ("c039", "H100", r"precision 'high' is [0-9.]+x faster than precision 'highest'", "TF32 beats IEEE fp32"),
    ],
    "08_speed": [
        ("c003", None, r"the call returned is [0-9.]+x faster than the work was done", "the host runs ahead"),
        # or no conclusion: the simulated host is this machine's Python, and on a slow or busy 2-core machine a
        # simulated H100 step is host-bound, where syncs cost little; never the reverse verdict
        ("c013", None, r"train_quietly is [0-9.]+x faster than train_noisily|"
                       r"train_quietly and train_noisily are within the noise", "host syncs cost time"),
        ("c034", None, r"the fastest optimizer step is AdamW fused", "fused AdamW launches fewest kernels"),
        ("c037", None, r"the first call on a new shape .*cudnn\.benchmark off", "N9: the new shape's contrast"),
    ],
    "09_fast_step": [
        ("c005", None, r"peak float32: [0-9.]+ GFLOP/s \(n=\d+; [0-9.]+ to [0-9.]+ from its spread\)", "a peak band"),
        ("c007", None, r"achieved [0-9.]+ GFLOP/s", "the plain step's utilisation"),
        ("c031", None, r"fast_step is [0-9.]+x faster than slow_step", "the exercise's step beats the slow one"),
    ],
    "10_kernels": [
        ("c005", None, r"ridge point: [0-9.]+ FLOP/byte", "a ridge point from the measured roofs"),
        ("c005", None, r"measured bandwidth 9\d% of it", "a copy reaches the datasheet's bandwidth"),
        ("c014", None, r"n=1024: [0-9.]+ GFLOP/s achieved", "the products timed against the roof"),
        ("c016", None, r"torch\.softmax is [0-9.]+x faster than eager chain", "the fused softmax beats the chain"),
    ],
}


# --------------------------------------------------------------------------- in the fresh Python


def _machine(profile_name: str, plant: str | None) -> tuple[Any, Any]:
    """The fake GPU and the timing profile for ``profile_name``, with ``plant`` (:data:`PLANTS`) put in."""
    from support import fake_cuda as fc
    from support import gpu_model as gm

    profile = gm.PROFILES[profile_name]
    if plant == "free_sync":
        profile = dataclasses.replace(profile, sync_s=gm.Figure(0.0, "planted: free"))
    if plant == "w1_reverted":
        from helpers import benchmark

        def torchs_own(timer: Any, clock: Any, *, min_run_time: float, max_run_time: float | None = None) -> Any:
            if max_run_time is not None:
                return timer.adaptive_autorange(threshold=0.1, min_run_time=min_run_time, max_run_time=max_run_time)
            return timer.blocked_autorange(min_run_time=min_run_time)

        benchmark.measure_blocks = torchs_own
    return {"H100": fc.H100, "T4": fc.T4}[profile_name], profile


@contextlib.contextmanager
def _simulated(profile_name: str, plant: str | None) -> Iterator[Any]:
    """One simulated GPU, its timers unbriefed, as ``make gpu-check`` would meet a real one: yields ``cuda:0``."""
    import torch

    from support import fake_cuda as fc

    gpu, profile = _machine(profile_name, plant)
    with fc.fake_cuda_machine(gpu, 1, profile), fc.stand_ins(brief=False):
        yield torch.device("cuda", 0)


def run_chapter(chapter: str, profile_name: str, plant: str | None = None) -> list[dict]:
    """Every code cell of ``chapter``'s solution on the simulated GPU, unbriefed: each cell's id, status, output."""
    from support import fake_cuda as fc
    from support.layout import load, solution_path

    gpu, profile = _machine(profile_name, plant)
    path = solution_path(chapter)
    runs, _ = fc.run_cells(load(path).cells, gpu, 1, cpu_seconds=60, wall_seconds=90, workdir=str(path.parent),
                           timing=profile, brief=False)
    return [{"id": r.cell_id, "index": r.index, "status": r.status, "reason": r.reason, "output": r.output}
            for r in runs]


#: steps an epoch of chapter 09's ladder on the simulated GPU (see run_ladder)
SIM_STEPS = 10
#: The measurement's arguments on the simulated GPU: no compiling (Dynamo cannot trace fake tensors), no child
#: processes (the loader's workers), no CUDA profiler (CUPTI); 09's ladder at SIM_STEPS an epoch (at the workload's 50
#: measure_09 took 240-270 s a profile in a CI run)
MEASURE_KWARGS = {"08_speed": {"trace": False, "compiled": False},
                  "09_fast_step": {"compiled": False, "workers": 0, "steps": SIM_STEPS},
                  "10_kernels": {"compiled": False}}


def run_measure(chapter: str, profile_name: str, plant: str | None = None) -> dict:
    """``chapter``'s ``measure_*`` on the simulated GPU, as ``make gpu-check`` calls it: its figures and skips."""
    from course_tools.gpu_check import measure
    from support import fake_cuda as fc

    with _simulated(profile_name, plant) as device:
        try:
            figures, skipped = measure.MEASURES[chapter](device, **MEASURE_KWARGS.get(chapter, {}))
        except fc.ChildProcessRefused as err:  # measure_07's device-side assert runs in a child process
            return {"figures": {}, "skipped": {}, "stopped": f"needs a child process, which runs no fake GPU: {err}"}
    return {"figures": {k: v if isinstance(v, (int, float, str)) else str(v) for k, v in figures.items()},
            "skipped": skipped, "stopped": ""}


def run_ladder(profile_name: str, plant: str | None = None) -> list[dict]:
    """Chapter 09's ladder at its GPU workload, as its cell climbs it, each rung judged against the one below.

    Without the compiled rung (Dynamo cannot trace fake tensors) and with the loader in the main process
    (a worker is a child process, which the fake machine refuses): the chapter's cell stops at its loader.
    """
    from helpers import amp, ladder
    from helpers import benchmark as bench
    from helpers.results import WORKLOADS

    w = WORKLOADS["09_fast_step"]
    # SIM_STEPS an epoch, not the workload's 50: a real GPU needs 50 so that each epoch's first batch (a new
    # iterator, its workers' first collate) is a small share of the epoch; here batches come from the main process
    # and the model has no per-epoch cost, so 10 steps time the same step, in a fifth of the time (50 steps made
    # each profile's ladder about 290 s of real Python on 2 cores)
    with _simulated(profile_name, plant) as device:
        rungs = [r for r in ladder.ladder(amp.pick_dtype(device)) if not r.compiled]
        data = ladder.make_data(w["batch"] * SIM_STEPS, w["tokens"])
        runs = ladder.climb(rungs, data, device, batch=w["batch"], dim=w["dim"], repeats=9, workers=0)
        report = []
        for below, run in zip([None, *runs], runs):
            verdict = bench.compare(run.timing, below.timing) if below else None
            report.append({"rung": run.rung.name, "median": run.timing.median, "repeats": len(run.timing.times),
                           "faster": verdict is not None and verdict.faster is run.timing,
                           "known": verdict is None or verdict.known,
                           "sentence": verdict.sentence() if verdict else run.timing.summary()})
    return report


def ladder_problems(profile_name: str, rungs: list[dict]) -> list[str]:
    """What chapter 09's ladder would conclude on a real GPU that the simulated one did not.

    Every rung measured often enough to judge; on the T4 16-bit autocast (fp16 tensor cores, 8x its float32 rate)
    beats the rung below, and on the H100 TF32 beats full float32. Not judged on the H100: autocast against TF32.
    There bf16 only halves the products' time, already short, while autocast's casts add launches: at the workload
    the simulated H100's step sits near the balance of its host (this machine's Python) and its device, where a
    CI run printed TF32 1.21x faster than autocast and other runs printed the reverse, as a real H100's result there
    would depend on its host. (Chapter 05's cell c043 still holds bf16 faster than fp32 on the H100.) Not judged,
    because the model cannot say (docs/STACK_NOTES.md): the sync-free and fed
    rungs (what they save is host work, the loader's page faults and pageable copies, which the simulation
    runs in this process at this CPU's measured rates), fused AdamW and SDPA (a kernel the fake machine lacks).
    """
    problems = [f"{r['rung']}: {r['sentence']}" for r in rungs if not r["known"]]
    by_name = {r["rung"]: r for r in rungs}
    # a T4 (Turing) has no TF32: there the rung changes nothing; on the H100, autocast is not judged (above)
    expected = ([("TF32", "TF32 tensor cores for float32 products")] if profile_name == "H100"
                else [("autocast", "16-bit tensor cores")])
    for rung, why in expected:
        # "within the noise" is accepted: on a slow host the simulated step is host-bound (this machine's Python is
        # the simulated host); a slower rung beyond the noise is not
        if rung in by_name and not by_name[rung]["faster"] and "within the noise" not in by_name[rung]["sentence"]:
            problems.append(f"the {rung} rung should be faster than the one below ({why}): {by_name[rung]['sentence']}")
    return problems


def run_model(profile_name: str, plant: str | None = None) -> dict:
    """What the simulated machine itself does, measured the way a program would (:func:`model_problems` judges)."""
    import statistics
    import time

    import torch

    from support import fake_cuda as fc

    with _simulated(profile_name, plant):
        def host(fn: Any, repeats: int = 21, least: bool = False) -> float:
            """The host's time for one call, the GPU idle before it: the median, or the least (a floor: the
            simulated part of a cost is exact, and what the real Python around it adds only ever adds)."""
            times = []
            for _ in range(repeats):
                torch.cuda.synchronize()
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
            return min(times) if least else statistics.median(times)

        big = torch.randn(4096, 4096, device="cuda")
        pageable, pinned = torch.empty(2**24), torch.empty(2**24).pin_memory()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        big @ big
        end.record()
        try:
            early = start.elapsed_time(end)
            read_early = f"read {early:.3f} ms"
        except RuntimeError as err:
            read_early = f"refused: {err}"
        torch.cuda.synchronize()
        timeline = fc._timeline()
        charged = timeline.charged
        torch.cuda.synchronize()  # an idle GPU: what the model charges the host for the call itself
        sync_charged_s = timeline.charged - charged
        return {"sync_s": host(torch.cuda.synchronize, least=True), "sync_charged_s": sync_charged_s,
                "launch_s": host(lambda: big.add_(1), least=True),
                "matmul_host_s": host(lambda: big @ big),
                "matmul_done_s": host(lambda: (big @ big, torch.cuda.synchronize())),
                "pageable_copy_s": host(lambda: pageable.to("cuda", non_blocking=True)),
                "pinned_copy_s": host(lambda: pinned.to("cuda", non_blocking=True)),
                "event_before_done": read_early,
                "event_ms": start.elapsed_time(end)}


def main(argv: list[str]) -> int:
    """``python -m support.gpu_sim {chapter|measure|ladder|model} NAME PROFILE OUT.json [PLANT]`` (:func:`apart`)."""
    kind, name, profile_name, out = argv[:4]
    plant = argv[4] if len(argv) > 4 else None
    if kind == "chapter":
        report: Any = run_chapter(name, profile_name, plant)
    elif kind == "measure":
        report = run_measure(name, profile_name, plant)
    elif kind == "ladder":
        report = run_ladder(profile_name, plant)
    else:
        report = run_model(profile_name, plant)
    Path(out).write_text(json.dumps(report))
    return 0


# --------------------------------------------------------------------------- in the test process


def apart(kind: str, name: str, profile_name: str, plant: str | None = None, timeout: float = 900) -> Any:
    """Run one chapter, measurement or model check on the simulated GPU in a fresh Python; its report, as data.

    Fresh, because the fake machine can leave a process's heap and torch's state changed (the fake-CUDA check
    does the same, tests/unit/helpers/test_cuda_branches.py). A child that dies before it reports fails.
    """
    with tempfile.TemporaryDirectory(prefix="gpu-sim-") as work:
        out = os.path.join(work, "report.json")
        args = [kind, name, profile_name, out] + ([plant] if plant else [])
        done = subprocess.run([sys.executable, "-c", "import sys; from support.gpu_sim import main; "
                               "sys.exit(main(sys.argv[1:]))", *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT / "tests")})
        if not os.path.exists(out):
            raise AssertionError(f"the simulated {profile_name} died running {kind} {name} (exit {done.returncode}):"
                                 f"\n{done.stderr[-3000:]}")
        return json.loads(Path(out).read_text())


def chapter_problems(chapter: str, profile_name: str, cells: list[dict]) -> list[str]:
    """What a real GPU would have printed differently from ``cells``: a device mix-up, a "too few repeats" no GPU
    would give, an expected conclusion missing (:data:`CHAPTER_EXPECTATIONS`)."""
    problems = []
    by_id = {c["id"]: c for c in cells}
    for c in cells:
        if c["status"] == "mismatch":
            problems.append(f"cell {c['id']} mixes devices: {c['reason']}")
        if "too few repeats" in c["output"] and c["id"] not in ALLOWED_FEW_REPEATS:
            line = next(x for x in c["output"].splitlines() if "too few repeats" in x)
            problems.append(f"cell {c['id']} has too few repeats, which a GPU would not: {line.strip()[:200]}")
    for cell_id, only, pattern, meaning in CHAPTER_EXPECTATIONS.get(chapter, []):
        if only not in (None, profile_name):
            continue
        cell = by_id.get(cell_id)
        if cell is None or not re.search(pattern, cell["output"]):
            shown = "did not run" if cell is None else f"{cell['status']} {cell['reason'][:120]}: " + \
                " | ".join(cell["output"].strip().splitlines()[-6:])[:600]
            problems.append(f"cell {cell_id} should show {meaning} (/{pattern}/); it printed: {shown}")
    return problems


def measure_problems(chapter: str, profile_name: str, report: dict) -> list[str]:
    """What ``make gpu-check`` would have stored on a real GPU that the simulated one did not."""
    figures, skipped = report["figures"], report["skipped"]
    problems = []
    if report["stopped"] and chapter != "07_troubleshooting":
        problems.append(f"measure_{chapter[:2]} stopped: {report['stopped']}")
    needed = {"01_why_gpus": ("crossover_n", "gpu_matmul_best", "gpu_call_floor"),
              "04_dataloader": ("h2d_pageable_bandwidth", "h2d_pinned_bandwidth"),
              "03_memory": ("oom_message",),
              "05_mixed_precision": ("step_fp32", "matmul_fp32_ieee"),
              "06_multi_gpu": ("gpu_count",),
              "09_fast_step": ("peak_fp32", "peak_16bit", "utilisation_best")}.get(chapter, ())
    for key in needed:
        if key not in figures:
            problems.append(f"measure_{chapter[:2]} did not measure {key}: {skipped.get(key, 'not in its figures')}")
    if chapter == "04_dataloader" and not problems:
        if not figures["h2d_pinned_bandwidth"] > figures["h2d_pageable_bandwidth"]:
            problems.append("copies from pinned memory were not faster than from pageable memory")
        if not figures["h2d_nonblocking_call"] < figures["h2d_blocking_call"]:
            problems.append("a non_blocking copy from pinned memory did not return sooner than a blocking one")
    return problems


def model_problems(report: dict) -> list[str]:
    """Whether the simulated machine keeps GPU-like time at all: the blindness issue 44 removed must not return."""
    problems = []
    # the model's own charge, not the host time around it: the fake's real Python cost (a few microseconds on a
    # slow or busy machine) would hide a free synchronize
    if report["sync_charged_s"] < 3e-6:
        problems.append(f"a synchronize of an idle GPU costs {report['sync_charged_s'] * 1e6:.2f} us: a real one costs "
                        "microseconds, and a free one hides W1 (a synchronising clock's cost)")
    if report["launch_s"] < 3e-6:
        problems.append(f"a launch costs the host {report['launch_s'] * 1e6:.2f} us")
    if not report["matmul_done_s"] > 5 * report["matmul_host_s"]:
        problems.append("a large product returned no sooner than it finished: the host does not run ahead")
    if not report["pageable_copy_s"] > 5 * report["pinned_copy_s"]:
        problems.append("a non_blocking copy from pageable memory did not block the host as one from pinned memory "
                        "does not")
    if not report["event_before_done"].startswith("refused"):
        problems.append(f"an event read before its work ran was not refused ({report['event_before_done']})")
    return problems
