"""Each chapter's GPU measurements: the figures ``helpers.results.FIGURES`` lists, measured for real.

One function per chapter, ``measure_<NN>(device) -> (figures, skipped)``. They measure with the
course's own tools (``helpers.benchmark``, ``helpers.memory``, ``helpers.dataloader``,
``helpers.troubleshoot``), so a stored figure means what the chapter's own cell would have printed on
that GPU. ``skipped`` names each figure that could not be measured and why; it is never filled with a
stand-in value.

Run one chapter in its own process (``python -m course_tools.gpu_check.measure CHAPTER OUT.json``): a
device-side assert or an out-of-memory error then cannot poison the next chapter's CUDA context.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

Measured = tuple[dict[str, Any], dict[str, str]]
MiB = 2**20


def _cuda(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.is_available()


def measure_01(device: torch.device, sizes: tuple[int, ...] = (16, 32, 64, 128, 256, 512, 1024, 2048),
               big: int = 8192, min_run_time: float = 0.04) -> Measured:
    """Chapter 01: its matrix-product sweep (the sizes its cell uses with an accelerator) on the CPU and
    ``device``, and the device's copy and add bandwidth at a size far beyond its caches."""
    from helpers import benchmark as bench

    def make(n: int, d: torch.device):
        a, b = torch.randn(n, n, device=d), torch.randn(n, n, device=d)
        return lambda: a @ b

    cpu = torch.device("cpu")
    table = bench.sweep(make, sizes, [cpu, device], work=bench.matmul_work, label="matmul",
                        min_run_time=min_run_time, warn=False, progress=False)
    cpu_rows, dev_rows = table.where(device=str(cpu)), table.where(device=str(device))
    speedups = [c["median"] / g["median"] for c, g in zip(cpu_rows, dev_rows)]
    best_cpu, best_dev = cpu_rows.best("flops_per_s", threshold=1.0), dev_rows.best("flops_per_s", threshold=1.0)
    tiny = torch.zeros(1, device=device)
    x, y, z = (torch.randn(big, big, device=device) for _ in range(3))
    copy = bench.time_callable(lambda: z.copy_(x), device, min_run_time=min_run_time, warn=False, **bench.copy_work(big))
    add = bench.time_callable(lambda: torch.add(x, y, out=z), device, min_run_time=min_run_time, warn=False,
                              **bench.add_work(big))
    figures = {
        "speedup_smallest": speedups[0],
        "speedup_largest": speedups[-1],
        "gpu_call_floor": bench.time_callable(lambda: tiny.add_(1), device, min_run_time=min_run_time, warn=False).median,
        "gpu_copy_bandwidth": copy.bytes_per_s,
        "gpu_add_bandwidth": add.bytes_per_s,
    }
    skipped = {}
    for name, best in (("cpu_matmul_best", best_cpu), ("gpu_matmul_best", best_dev)):
        if best is None:  # a busy machine: no size measured steadily enough to name the best one
            skipped[name] = "no size was measured steadily enough to name the best (too few blocks, or IQR >= median)"
        else:
            figures[name] = best["flops_per_s"]
    if best_dev is not None:
        figures["gpu_matmul_best_n"] = best_dev["size"]
    else:
        skipped["gpu_matmul_best_n"] = skipped["gpu_matmul_best"]
    crossover = bench.crossover(list(sizes), list(bench.verdicts_by_size(table, device, cpu).values()))  # the chapter's rule
    if crossover is None:
        skipped["crossover_n"] = (f"the GPU was not faster beyond the noise at every size from some size on (speed-ups "
                                  f"{[round(s, 2) for s in speedups]})")
    else:
        figures["crossover_n"] = crossover
    return figures, skipped


def measure_03(device: torch.device) -> Measured:
    """Chapter 03 §1: the caching allocator (allocated against reserved) and a real out-of-memory message."""
    if not _cuda(device):
        return {}, {k: f"needs CUDA's caching allocator; ran on {device}" for k in
                    ("allocated_after_alloc", "reserved_after_alloc", "allocated_after_free", "reserved_after_free",
                     "reserved_after_empty_cache", "oom_message")}
    torch.cuda.empty_cache()
    base_a, base_r = torch.cuda.memory_allocated(device), torch.cuda.memory_reserved(device)
    x = torch.empty(64 * MiB, dtype=torch.uint8, device=device)
    figures = {"allocated_after_alloc": torch.cuda.memory_allocated(device) - base_a,
               "reserved_after_alloc": torch.cuda.memory_reserved(device) - base_r}
    del x
    figures["allocated_after_free"] = torch.cuda.memory_allocated(device) - base_a
    figures["reserved_after_free"] = torch.cuda.memory_reserved(device) - base_r
    torch.cuda.empty_cache()
    figures["reserved_after_empty_cache"] = torch.cuda.memory_reserved(device) - base_r
    _, total = torch.cuda.mem_get_info(device)
    try:
        torch.empty(total + 2**30, dtype=torch.uint8, device=device)  # more than the whole GPU: fails at once
    except torch.OutOfMemoryError as err:
        figures["oom_message"] = str(err)
    return figures, {} if "oom_message" in figures else {"oom_message": "asking for more than the GPU did not fail"}


def measure_04(device: torch.device, nbytes: int = 64 * MiB) -> Measured:
    """Chapter 04: host-to-GPU copies from pageable and pinned memory, and what non_blocking returns."""
    if not _cuda(device):
        return {}, {k: f"needs a CUDA GPU's copy engine; ran on {device}" for k in
                    ("h2d_pageable_bandwidth", "h2d_pinned_bandwidth", "h2d_blocking_call", "h2d_nonblocking_call")}
    from helpers.dataloader import copy_bandwidth

    figures = {"h2d_pageable_bandwidth": copy_bandwidth(nbytes, device, pinned=False),
               "h2d_pinned_bandwidth": copy_bandwidth(nbytes, device, pinned=True)}
    host = torch.empty(nbytes // 4).pin_memory()
    for key, non_blocking in (("h2d_blocking_call", False), ("h2d_nonblocking_call", True)):
        figures[key] = _host_time_of_one_call(lambda: host.to(device, non_blocking=non_blocking), device)
    return figures, {}


def _host_time_of_one_call(fn: Callable[[], Any], device: torch.device, repeats: int = 21) -> float:
    """Median host time until ``fn()`` returns, the device idle before each call.

    Not ``time_callable``: that times many calls back to back, and queued asynchronous copies would end up
    waiting for each other. What a non_blocking copy saves is exactly the time before the call returns, so
    the clock is read around one call and the device synchronised outside the timed region.
    """
    import statistics
    import time

    times = []
    for _ in range(repeats):
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    torch.cuda.synchronize(device)
    return statistics.median(times[1:])  # the first call pays for a new allocation


def measure_05(device: torch.device, samples: int = 4096, features: int = 1024, hidden: int = 4096, n: int = 8192,
               min_run_time: float = 0.1) -> Measured:
    """Chapter 05: its GPU comparison (``amp.compare_precisions`` as its cell runs it on CUDA), then TF32.

    A GPU without bf16 (or TF32) tensor cores (a T4, 7.5) would only measure torch's emulation or a switch
    that changes nothing: those figures are not measured there, as the chapter's cells skip them.
    """
    from torch.nn import functional as F

    from helpers import amp
    from helpers.benchmark import matmul_work, time_callable
    from helpers.models import MLP, make_regression, set_seed

    units = amp.low_precision_units(device) if _cuda(device) else {}  # a CPU rehearsal runs every step
    bf16, tf32 = units.get("bf16 tensor cores", True), units.get("tf32 tensor cores", True)
    skipped = {}
    if not bf16:
        skipped.update(dict.fromkeys(("step_bf16", "peak_bf16", "matmul_bf16"),
                                     "this GPU has no bf16 tensor cores (bf16 is emulated): not measured"))
    if not tf32:
        skipped["matmul_fp32_tf32"] = "this GPU has no TF32 tensor cores: not measured"
    set_seed(0)
    x, y = make_regression(n=samples, in_features=features)
    chosen = ("fp32", "bf16", "fp16+scaler") if bf16 else ("fp32", "fp16+scaler")
    variants = amp.compare_precisions(lambda: MLP(in_features=features, hidden=hidden, out_features=1, depth=2),
                                      x, y, F.mse_loss, device, steps=20, lr=1e-3, min_run_time=min_run_time,
                                      variants=chosen)
    key = {"fp32": "fp32", "bf16": "bf16", "fp16+scaler": "fp16_scaler"}
    figures: dict[str, Any] = {f"step_{key[v.name]}": v.step_time.median for v in variants}
    figures.update({f"peak_{key[v.name]}": v.peak_bytes for v in variants if v.name in ("fp32", "bf16")})
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    matmul = torch.backends.cuda.matmul
    before = matmul.allow_tf32
    try:
        for name, on in (("matmul_fp32_ieee", False), ("matmul_fp32_tf32", True)):
            if on and not tf32:
                continue
            matmul.allow_tf32 = on  # the switch torch 2.11 and 2.13 both honour
            figures[name] = time_callable(lambda: a @ b, device, min_run_time=min_run_time, warn=False,
                                          **matmul_work(n)).flops_per_s
    finally:
        matmul.allow_tf32 = before
    if bf16:
        a16, b16 = a.bfloat16(), b.bfloat16()
        figures["matmul_bf16"] = time_callable(lambda: a16 @ b16, device, min_run_time=min_run_time, warn=False,
                                               **matmul_work(n, torch.bfloat16)).flops_per_s
    return figures, skipped


def measure_06(device: torch.device) -> Measured:
    """Chapter 06: how many GPUs the check saw; DDP across GPUs needs two or more."""
    count = torch.cuda.device_count() if _cuda(device) else 0
    return {"gpu_count": count}, {}


def measure_07(device: torch.device) -> Measured:
    """Chapter 07: a real device-side assert, in a child process (it breaks the CUDA context it happens in)."""
    if not _cuda(device):
        return {}, {"device_assert_message": f"a device-side assert needs CUDA; ran on {device}"}
    from helpers.troubleshoot import cuda_assert_in_subprocess

    return {"device_assert_message": cuda_assert_in_subprocess(blocking=True)}, {}


MEASURES: dict[str, Callable[[torch.device], Measured]] = {
    "01_why_gpus": measure_01,
    "03_memory": measure_03,
    "04_dataloader": measure_04,
    "05_mixed_precision": measure_05,
    "06_multi_gpu": measure_06,
    "07_troubleshooting": measure_07,
}


#: Small sizes for a CPU rehearsal (``gpu-check --rehearse``) and the tests: the same code, in seconds.
REHEARSAL: dict[str, dict[str, Any]] = {
    "01_why_gpus": {"sizes": (16, 32), "big": 64, "min_run_time": 0.01},
    "05_mixed_precision": {"samples": 32, "features": 8, "hidden": 16, "n": 64, "min_run_time": 0.01},
}


def main(argv: list[str]) -> int:
    """``python -m course_tools.gpu_check.measure CHAPTER OUT.json [DEVICE]``: measure one chapter, write JSON."""
    if len(argv) not in (2, 3) or argv[0] not in MEASURES:
        print(f"usage: python -m course_tools.gpu_check.measure {{{','.join(MEASURES)}}} OUT.json [DEVICE]", file=sys.stderr)
        return 2
    device = torch.device(argv[2] if len(argv) == 3 else "cuda")
    small = REHEARSAL.get(argv[0], {}) if device.type == "cpu" else {}
    figures, skipped = MEASURES[argv[0]](device, **small)
    Path(argv[1]).write_text(json.dumps({"figures": figures, "skipped": skipped}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
