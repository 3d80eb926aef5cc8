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

import copy
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

    return {"device_assert_message": cuda_assert_in_subprocess(blocking=True, device=device)}, {}


def _solution_source(chapter: str, grade_id: str) -> str:
    """The reference solution cell of an exercise, read from ``solutions/`` (the one place it is written)."""
    path = Path(__file__).resolve().parents[2] / "solutions" / chapter / f"{chapter}.ipynb"
    for cell in json.loads(path.read_text())["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id:
            source = cell["source"]
            return "".join(source) if isinstance(source, list) else source
    raise LookupError(f"no solution cell {grade_id!r} in {path}")


def measure_08(device: torch.device, batches: int = 20, batch: int | None = None, width: int | None = None,
               rows: int | None = None, features: int | None = None, repeats: int = 7, min_run_time: float = 0.2,
               trace: bool = True, compiled: bool = True) -> Measured:
    """Chapter 08: the noisy and quiet loops, copies beside compute on a side stream (timed with events and
    read from a trace), torch.compile (default and reduce-overhead), and the cheap wins, as its cells run them.

    The sizes default to ``helpers.results.WORKLOADS["08_speed"]``, the same the stored figures' descriptions
    name (the rehearsal passes smaller ones). ``trace=False`` leaves out the profiler (CUPTI needs a real GPU),
    ``compiled=False`` torch.compile (Dynamo cannot trace fake tensors): the fake-CUDA check
    (tests/unit/helpers/test_cuda_branches.py) runs the rest. Every stream, event and synchronize names ``device``."""
    import statistics
    import tempfile
    import time

    from torch import nn
    from torch.nn import functional as F

    from helpers import amp, speed
    from helpers import benchmark as bench
    from helpers.checks.ch08 import noisy_epoch
    from helpers.device import synchronize
    from helpers.memory import native_stderr
    from helpers.results import WORKLOADS

    w = WORKLOADS["08_speed"]
    batch = w["loop_batch"] if batch is None else batch
    width = w["loop_width"] if width is None else width
    rows = w["stream_rows"] if rows is None else rows
    features = w["features"] if features is None else features
    figures: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    namespace: dict[str, Any] = {"torch": torch, "F": F}
    exec(compile(_solution_source("08_speed", "train-quietly"), "train_quietly", "exec"), namespace)  # noqa: S102
    quiet = namespace["train_quietly"]

    def run(size: int) -> tuple:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, size), nn.ReLU(), nn.Linear(size, 10)).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        data = [(torch.randn(batch, 64).to(device), torch.randint(0, 10, (batch,)).to(device)) for _ in range(batches)]
        return model, optimizer, data

    def seconds_per_step(fn: Callable, size: int) -> float:
        args = run(size)
        synchronize(device)
        start = time.perf_counter()
        fn(*args)
        synchronize(device)
        return (time.perf_counter() - start) / batches

    if _cuda(device):  # cell c013: the width at which the device's time per step has caught up with the host's
        width = speed.size_for_balance(lambda size: seconds_per_step(quiet, size), [width * 2**i for i in range(12)])[0]
    figures["loop_width"] = width
    per_step: dict[str, list[float]] = {"loop_noisy_step": [], "loop_quiet_step": []}
    for _ in range(repeats):
        for key, fn in (("loop_noisy_step", noisy_epoch), ("loop_quiet_step", quiet)):
            per_step[key].append(seconds_per_step(fn, width))
    figures.update({k: statistics.median(v) for k, v in per_step.items()})

    stream_keys = ("streams_one_stream", "streams_side_stream", "overlap_one_stream", "overlap_side_stream")
    if _cuda(device):  # cell c017
        from torch.profiler import ProfilerActivity, profile

        host = [torch.randn(rows, 1024).pin_memory() for _ in range(w["stream_batches"])]
        weight = torch.randn(1024, 1024, device=device) / 32
        variants = {"one_stream": None, "side_stream": torch.cuda.Stream(device)}
        times: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(3):
            for side in variants.values():
                speed.copy_and_compute(host, weight, side)
        for _ in range(15):  # interleaved, as the cell does
            for name, side in variants.items():
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize(device)
                start.record(torch.cuda.current_stream(device))
                speed.copy_and_compute(host, weight, side)
                end.record(torch.cuda.current_stream(device))
                end.synchronize()
                times[name].append(start.elapsed_time(end) / 1000)
        for name, side in variants.items():
            figures[f"streams_{name}"] = statistics.median(times[name])
            if not trace:
                skipped[f"overlap_{name}"] = "not traced (trace=False)"
                continue
            with native_stderr(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                speed.copy_and_compute(host, weight, side)
                torch.cuda.synchronize(device)
            with tempfile.TemporaryDirectory() as tmp:
                prof.export_chrome_trace(f"{tmp}/trace.json")
                figures[f"overlap_{name}"] = speed.copy_compute_overlap(f"{tmp}/trace.json").fraction
    else:
        skipped.update(dict.fromkeys(stream_keys, f"streams and the copy engine are CUDA's; ran on {device}"))

    compile_keys = ("compile_s", "compile_eager", "compile_compiled")
    small_keys = ("compile_small_eager", "compile_small_default", "compile_small_reduce_overhead")
    count_keys = tuple(f"small_{what}_{mode}" for what in ("kernels", "launches")
                       for mode in ("eager", "default", "reduce_overhead"))
    why_not = speed.compiler_missing(device)

    def bias_gelu_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:  # chapter 08, cell c019
        y = x * w + b
        y = y * torch.sigmoid(1.702 * y)
        return (y - y.mean(dim=-1, keepdim=True)) / (y.var(dim=-1, keepdim=True) + 1e-5).sqrt()

    scale, shift = torch.randn(features, device=device), torch.randn(features, device=device)
    if not compiled:
        why_not = "not compiled (compiled=False)"
    if why_not:
        skipped.update(dict.fromkeys(compile_keys + small_keys + count_keys, why_not))
    else:
        with torch.no_grad():  # compile_timings resets Dynamo first, as the cells' order does
            big = (torch.randn(w["compile_batch"], features, device=device), scale, shift)
            t = speed.compile_timings(bias_gelu_norm, big, device)
            figures.update(compile_s=t.compile_s, compile_eager=t.eager.median, compile_compiled=t.compiled.median)
            if _cuda(device):  # cell c025: a chain of matrix products no fusion removes
                n = w["chain_width"]
                chain = nn.Sequential(*[layer for _ in range(w["chain_layers"])
                                        for layer in (nn.Linear(n, n), nn.GELU())]).to(device).eval()
                small = (torch.randn(w["small_batch"], n, device=device),)
                counts = {"eager": speed.kernels_per_call(chain, small, device)} if trace else {}
                d = speed.compile_timings(chain, small, device)
                if trace:
                    counts["default"] = speed.kernels_per_call(d.compiled_fn, small, device)
                g = speed.compile_timings(chain, small, device, mode="reduce-overhead")
                if trace:
                    counts["reduce_overhead"] = speed.kernels_per_call(g.compiled_fn, small, device)
                figures.update(compile_small_eager=d.eager.median, compile_small_default=d.compiled.median,
                               compile_small_reduce_overhead=g.compiled.median)
                for mode, c in counts.items():
                    figures[f"small_kernels_{mode}"] = round(c.kernels, 1)
                    figures[f"small_launches_{mode}"] = round(c.launches, 1)
                if not trace:
                    skipped.update(dict.fromkeys(count_keys, "not traced (trace=False)"))
            else:
                skipped.update(dict.fromkeys(small_keys + count_keys, f"CUDA graphs need a CUDA GPU; ran on {device}"))
        torch._dynamo.reset()

    layers = nn.Sequential(*[nn.Linear(w["optimizer_width"], w["optimizer_width"])
                             for _ in range(w["optimizer_layers"])]).to(device)
    for p in layers.parameters():
        p.grad = torch.randn_like(p)
    for key, options in (("adamw_foreach", {"foreach": True}), ("adamw_fused", {"fused": True})):
        opt = torch.optim.AdamW(layers.parameters(), lr=1e-6, **options)
        opt.step()
        figures[key] = bench.time_callable(opt.step, device, min_run_time=min_run_time, warn=False).median

    conv_keys = ("conv_block_nchw_16bit", "conv_block_channels_last_16bit")
    if _cuda(device):  # cell c035, its 16-bit rows
        block = nn.Sequential(nn.Conv2d(w["conv_in"], w["conv_out"], 3, padding=1), nn.BatchNorm2d(w["conv_out"]),
                              nn.ReLU()).to(device).eval()
        block_cl = copy.deepcopy(block).to(memory_format=torch.channels_last)
        images = torch.randn(w["conv_shape"], device=device)
        images_cl = images.to(memory_format=torch.channels_last)
        with torch.no_grad(), torch.autocast("cuda", dtype=amp.pick_dtype(device)):
            for key, m, x in ((conv_keys[0], block, images), (conv_keys[1], block_cl, images_cl)):
                figures[key] = bench.time_callable(lambda m=m, x=x: m(x), device, min_run_time=min_run_time,
                                                   warn=False).median
    else:
        skipped.update(dict.fromkeys(conv_keys, f"16-bit convolutions under autocast are measured on CUDA; ran on {device}"))

    # cell c036: 16-bit on a GPU, as autocast hands attention its inputs; float32 on a CPU
    dtype = amp.pick_dtype(device) if _cuda(device) else torch.float32
    q, k, v = (torch.randn(w["attention_shape"], device=device, dtype=dtype) for _ in range(3))
    scale_qk = w["attention_shape"][-1] ** 0.5
    figures["sdpa"] = bench.time_callable(lambda: F.scaled_dot_product_attention(q, k, v), device,
                                          min_run_time=min_run_time, warn=False).median
    figures["naive_attention"] = bench.time_callable(lambda: (q @ k.transpose(-2, -1) / scale_qk).softmax(-1) @ v,
                                                     device, min_run_time=min_run_time, warn=False).median
    cudnn_keys = ("cudnn_benchmark_off", "cudnn_benchmark_on", "cudnn_benchmark_new_shape_off",
                  "cudnn_benchmark_new_shape")
    if _cuda(device):  # cell c037
        conv = nn.Conv2d(w["conv_in"], w["conv_out"], 3, padding=1).to(device).eval()
        images = torch.randn(w["conv_shape"], device=device)
        new_shape = torch.randn(w["new_conv_shape"], device=device)
        before = torch.backends.cudnn.benchmark
        try:
            with torch.no_grad():
                for key, on in (("cudnn_benchmark_off", False), ("cudnn_benchmark_on", True)):
                    torch.backends.cudnn.benchmark = on
                    figures[key] = bench.time_callable(lambda: conv(images), device, min_run_time=min_run_time,
                                                       warn=False).median
                for key, on in (("cudnn_benchmark_new_shape_off", False), ("cudnn_benchmark_new_shape", True)):
                    torch.backends.cudnn.benchmark = on  # the same new shape: only the second call searches
                    synchronize(device)
                    start = time.perf_counter()
                    conv(new_shape)
                    synchronize(device)
                    figures[key] = time.perf_counter() - start
        finally:
            torch.backends.cudnn.benchmark = before
    else:
        skipped.update(dict.fromkeys(cudnn_keys, f"cuDNN is CUDA's; ran on {device}"))
    return figures, skipped


def measure_09(device: torch.device, dim: int | None = None, tokens: int | None = None, batch: int | None = None,
               steps: int | None = None, peak_sizes: tuple[int, ...] | None = None, repeats: int = 9,
               min_run_time: float = 0.2, compiled: bool = True, workers: int | None = None) -> Measured:
    """Chapter 09: the measured peaks, the step's FLOPs and every rung of the ladder, as its cells climb it.

    The sizes default to ``helpers.results.WORKLOADS["09_fast_step"]`` (the rehearsal passes smaller ones).
    ``compiled=False`` leaves out the compiled rung (Dynamo cannot trace the fake CUDA check's tensors),
    ``workers=0`` the fed loader's worker processes (the fake CUDA check starts no child process)."""
    from helpers import amp, datasheet, ladder, speed
    from helpers.results import WORKLOADS

    w = WORKLOADS["09_fast_step"]
    dim, tokens = w["dim"] if dim is None else dim, w["tokens"] if tokens is None else tokens
    batch, steps = w["batch"] if batch is None else batch, w["steps"] if steps is None else steps
    peak_sizes = w["peak_sizes"] if peak_sizes is None else peak_sizes
    figures: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    amp_dtype = amp.pick_dtype(device)
    peaks = {torch.float32: ladder.measured_peak(device, torch.float32, peak_sizes, min_run_time=min_run_time),
             amp_dtype: ladder.measured_peak(device, amp_dtype, peak_sizes, min_run_time=min_run_time)}
    tf32 = ladder.measured_peak(device, torch.float32, peak_sizes, min_run_time=min_run_time, tf32=True)
    figures.update(peak_fp32=peaks[torch.float32].flops_per_s, peak_tf32=tf32.flops_per_s,
                   peak_16bit=peaks[amp_dtype].flops_per_s)
    model = ladder.Block(dim=dim).to(device)
    x = torch.randint(0, ladder.VOCAB, (batch, tokens), device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    flops = ladder.step_flops(model, x, y).total
    figures["step_flops"] = flops
    rungs = ladder.ladder(amp_dtype)
    why_not = "not compiled (compiled=False)" if not compiled else speed.compiler_missing(device)
    if why_not:
        rungs = [r for r in rungs if not r.compiled]
        skipped.update(step_compiled=why_not, compile_s=why_not)
    data = ladder.make_data(batch * steps, tokens)
    workers = (w["workers"] if _cuda(device) else 0) if workers is None else workers
    runs = ladder.climb(rungs, data, device, batch=batch, dim=dim, repeats=repeats, workers=workers)
    for run in runs:
        figures[f"step_{ladder.slug(run.rung.name)}"] = run.timing.median / steps
        if run.compile_s is not None:
            figures["compile_s"] = run.compile_s
    best = min(runs, key=lambda run: run.timing.median)
    achieved = flops * steps / best.timing.median
    # one denominator for every rung: the best peak measured in any format (chapter 09's "of measured peak")
    figures["utilisation_best"] = achieved / max(p.flops_per_s for p in (*peaks.values(), tf32))
    sheet = datasheet.lookup(torch.cuda.get_device_name(device) if _cuda(device) else None)
    if sheet is None:
        skipped["mfu_best"] = "no datasheet figure for this device in helpers.datasheet"
    else:
        figures["mfu_best"] = achieved / sheet.training_peak[1]
    if compiled:
        torch._dynamo.reset()
    return figures, skipped


def _reference_softmax(triton: Any, tl: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    """Chapter 10's reference answer to exercise 2 (``softmax_rows``), from the solution notebook: what ``make
    gpu-check`` times is exactly what the checks accept."""
    namespace: dict[str, Any] = {"torch": torch, "triton": triton, "tl": tl}
    exec(compile(_solution_source("10_kernels", "softmax-kernel"), "10_kernels:softmax-kernel", "exec"),  # noqa: S102
         namespace)
    return namespace["softmax_rows"]


def _softmax_chain(x: torch.Tensor) -> torch.Tensor:
    """Chapter 10's softmax written as eager elementwise operations (its cell c016)."""
    m = x.amax(dim=1, keepdim=True)
    e = (x - m).exp()
    return e / e.sum(dim=1, keepdim=True)


def measure_10(device: torch.device, copy_mib: int | None = None, peak_sizes: tuple[int, ...] | None = None,
               rows: int | None = None, cols: int | None = None, min_run_time: float = 0.3,
               compiled: bool = True) -> Measured:
    """Chapter 10: the roofline's two measured limits, and a row softmax eager, fused by torch, compiled, and as the
    chapter's Triton kernel (compiled on a GPU; under the interpreter it is checked, never timed)."""
    from helpers import benchmark as bench
    from helpers import kernels, ladder, roofline, speed
    from helpers.results import WORKLOADS

    w = WORKLOADS["10_kernels"]
    copy_mib = w["copy_mib"] if copy_mib is None else copy_mib
    peak_sizes = w["peak_sizes"] if peak_sizes is None else peak_sizes
    rows, cols = w["rows"] if rows is None else rows, w["cols"] if cols is None else cols
    figures: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    for op in ("copy", "add"):
        measured = roofline.measure_bandwidth(device, nbytes=copy_mib * MiB, op=op, min_run_time=min_run_time)
        figures[f"{op}_bytes_per_s"] = measured.bytes_per_s
    figures["peak_fp32"] = ladder.measured_peak(device, torch.float32, peak_sizes,
                                                min_run_time=min_run_time).flops_per_s
    x = torch.randn(rows, cols, device=device)
    figures["softmax_eager_s"] = bench.time_callable(lambda: _softmax_chain(x), device,
                                                     min_run_time=min_run_time).median
    figures["softmax_torch_s"] = bench.time_callable(lambda: torch.softmax(x, dim=1), device,
                                                     min_run_time=min_run_time).median
    why_not = "not compiled (compiled=False)" if not compiled else speed.compiler_missing(device)
    if why_not:
        skipped["softmax_compiled_s"] = why_not
    else:
        chain = torch.compile(_softmax_chain)
        figures["softmax_compiled_s"] = bench.time_callable(lambda: chain(x), device,
                                                            min_run_time=min_run_time).median
        torch._dynamo.reset()
    triton, tl, status = kernels.setup(device)
    if status.mode != "compiled":
        skipped.update(softmax_triton_s=status.reason, softmax_triton_share=status.reason)
    else:
        softmax_rows = _reference_softmax(triton, tl)
        torch.testing.assert_close(softmax_rows(x), torch.softmax(x, dim=1))
        mine = bench.time_callable(lambda: softmax_rows(x), device, nbytes=2 * x.nbytes, min_run_time=min_run_time)
        figures["softmax_triton_s"] = mine.median
        figures["softmax_triton_share"] = mine.bytes_per_s / figures["copy_bytes_per_s"]
    return figures, skipped


MEASURES: dict[str, Callable[[torch.device], Measured]] = {
    "01_why_gpus": measure_01,
    "03_memory": measure_03,
    "04_dataloader": measure_04,
    "05_mixed_precision": measure_05,
    "06_multi_gpu": measure_06,
    "07_troubleshooting": measure_07,
    "08_speed": measure_08,
    "09_fast_step": measure_09,
    "10_kernels": measure_10,
}


#: Small sizes for a CPU rehearsal (``gpu-check --rehearse``) and the tests: the same code, in seconds.
REHEARSAL: dict[str, dict[str, Any]] = {
    "01_why_gpus": {"sizes": (16, 32), "big": 64, "min_run_time": 0.01},
    "05_mixed_precision": {"samples": 32, "features": 8, "hidden": 16, "n": 64, "min_run_time": 0.01},
    "08_speed": {"batches": 3, "batch": 16, "width": 32, "features": 64, "repeats": 3, "min_run_time": 0.01},
    "09_fast_step": {"dim": 16, "tokens": 8, "batch": 4, "steps": 2, "peak_sizes": (32, 64), "repeats": 3,
                     "min_run_time": 0.01},
    "10_kernels": {"copy_mib": 1, "peak_sizes": (32, 64), "rows": 16, "cols": 100, "min_run_time": 0.01},
}


def main(argv: list[str]) -> int:
    """``python -m course_tools.gpu_check.measure CHAPTER OUT.json [DEVICE]``: measure one chapter, write JSON."""
    if len(argv) not in (2, 3) or argv[0] not in MEASURES:
        print(f"usage: python -m course_tools.gpu_check.measure {{{','.join(MEASURES)}}} OUT.json [DEVICE]", file=sys.stderr)
        return 2
    from helpers.device import pick_device

    device = pick_device(argv[2] if len(argv) == 3 else "cuda")  # a GPU named by index becomes the current one
    small = REHEARSAL.get(argv[0], {}) if device.type == "cpu" else {}
    figures, skipped = MEASURES[argv[0]](device, **small)
    Path(argv[1]).write_text(json.dumps({"figures": figures, "skipped": skipped}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
