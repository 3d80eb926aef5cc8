"""Chapter 09's technique: one training step made fast a change at a time, measured against the speed of light.

The chapter writes each change out with raw torch first; this module holds what it then repeats for every
rung, so the notebook and ``make gpu-check`` (``course_tools.gpu_check.measure.measure_09``) time the very
same steps:

* :class:`Block`: the small but real model (token ids through an embedding, a pre-norm transformer block and
  a linear head), with the attention written out (``softmax(q kᵀ/√d) v``) or fused
  (``F.scaled_dot_product_attention``). It reads int64 token ids, as every language-model trainer does: a
  batch is 128 KiB at the GPU workload, where dense float "embeddings" would be 32 MiB that the loader's
  workers and pinning thread copy twice a batch, and the ladder would time the loader, not the step.
* :func:`step_flops`: the FLOPs of one training step (forward and backward) by module, counted by torch's
  ``FlopCounterMode``, which counts a matrix product of (M, K) by (K, N) as 2·M·N·K (a multiply and an add).
* :func:`measured_peak`: the speed of light, measured: chapter 01's matrix-product sweep on this device and
  dtype, its best size, with its spread.
* :class:`Rung` and :func:`climb`: the ladder (a plain float32 step, then one change at a time), each rung's
  steps timed interleaved with the others', so a change in the machine's load hits every rung alike.

A technique: it measures through :mod:`helpers.benchmark` and imports no other technique (the loader is
plain ``torch.utils.data``, the autocast dtype is the caller's: ``amp.pick_dtype`` in the chapter).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from helpers import benchmark as bench
from helpers.device import synchronize
from helpers.i18n import N_, _

#: the token ids' range: a small vocabulary (the embedding is a lookup, no FLOPs, a little memory)
VOCAB = 1000

__all__ = ["VOCAB", "Block", "Peak", "Rung", "RungRun", "StepFlops", "climb", "ladder", "make_data", "matmul_precision",
           "measured_peak", "slug", "step_flops", "train_steps"]


class Block(nn.Module):
    """Token ids through an embedding, a pre-norm transformer block (attention, then an MLP, each with a
    residual) and a classifier head.

    ``sdpa=False`` writes attention out, ``softmax(q kᵀ/√d) v``, storing the (tokens x tokens) weights;
    ``sdpa=True`` calls ``F.scaled_dot_product_attention``, one fused kernel. The two compute the same
    function with the same parameters (a ``state_dict`` moves between them)."""

    def __init__(self, dim: int = 64, heads: int = 4, classes: int = 10, sdpa: bool = False,
                 vocab: int = VOCAB) -> None:
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.embed = nn.Embedding(vocab, dim)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.head = nn.Linear(dim, classes)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v)
        else:
            y = (q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)).softmax(dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, d))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        x = x + self.attention(self.norm1(x))
        x = x + self.mlp(self.norm2(x))
        return self.head(x.mean(dim=1))


def make_data(samples: int, tokens: int, classes: int = 10, vocab: int = VOCAB, seed: int = 0) -> TensorDataset:
    """``samples`` random sequences of ``tokens`` token ids (int64) and a class each, made here (no download)."""
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randint(0, vocab, (samples, tokens), generator=g),
                         torch.randint(0, classes, (samples,), generator=g))


# --------------------------------------------------------------------------- the speed of light


@dataclasses.dataclass(frozen=True)
class StepFlops:
    """FLOPs of one training step: the forward's, the backward's, and the whole step's by module."""

    forward: int
    total: int
    by_module: dict[str, int]  #: FlopCounterMode's module names ("Global" is the whole step), forward and backward

    @property
    def backward(self) -> int:
        return self.total - self.forward


def step_flops(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> StepFlops:
    """Count one step's FLOPs (``F.cross_entropy(model(x), y)``, then backward) with ``FlopCounterMode``.

    The forward is counted on its own too: the backward of a matrix product is two products of the same size
    (one for the input's gradient, one for the weight's), so a step is about three forwards. The gradients
    the backward leaves are cleared (``set_to_none``): counting changes nothing a training run sees."""
    sys.audit("course.version", "helpers.ladder:step_flops")  # the grader: no exercise passes by calling this
    from torch.utils.flop_counter import FlopCounterMode  # noqa: PLC0415

    with FlopCounterMode(display=False) as forward_counter, torch.no_grad():
        model(x)
    with FlopCounterMode(display=False) as counter:
        F.cross_entropy(model(x), y).backward()
    model.zero_grad(set_to_none=True)
    by_module = {name: int(sum(ops.values())) for name, ops in counter.get_flop_counts().items()}
    return StepFlops(int(forward_counter.get_total_flops()), int(counter.get_total_flops()), by_module)


@dataclasses.dataclass(frozen=True)
class Peak:
    """The best matrix product of a sweep: its FLOP/s, size and timing (the spread of the peak itself)."""

    flops_per_s: float
    size: int
    timing: bench.Timing
    dtype: torch.dtype
    tf32: bool = False  #: float32 products on TF32 tensor cores (``torch.set_float32_matmul_precision("high")``)

    @property
    def name(self) -> str:
        """``"float32"``, ``"tf32"``, ``"bfloat16"``...: the format, as :mod:`helpers.datasheet` names it."""
        return "tf32" if self.tf32 else str(self.dtype).removeprefix("torch.")

    @property
    def band(self) -> tuple[float, float]:
        """FLOP/s at the median plus and minus half the IQR: the peak's own noise."""
        return rate_band(self.timing.flops or 0.0, self.timing)


def rate_band(amount: float, timing) -> tuple[float, float]:
    """``amount`` per second at the median time plus and minus half its IQR (FLOP/s, samples/s).

    A spread wider than the median leaves no upper bound: the high end is ``inf``, never a division by almost
    nothing (on a busy machine a peak once read 268,435,456,000 GFLOP/s that way)."""
    half = timing.iqr / 2
    return amount / (timing.median + half), (amount / (timing.median - half) if timing.median > half else math.inf)


@contextlib.contextmanager
def matmul_precision(tf32: bool):
    """float32 products in TF32 (``"high"``) or in full float32 (``"highest"``, torch's default), then as before.

    The setting is process-wide; a rung or a peak that changes it puts it back, so nothing after it (another
    rung, the learner's next cell) inherits TF32 unasked. On a CPU ``"high"`` changes nothing (TF32 is a tensor-
    core format of NVIDIA GPUs from Ampere on)."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def measured_peak(device: str | torch.device, dtype: torch.dtype = torch.float32,
                  sizes: Iterable[int] = (128, 256, 512), min_run_time: float = 0.1, rounds: int = 3,
                  tf32: bool = False) -> Peak:
    """Chapter 01's matrix-product sweep on ``device`` in ``dtype``; the best size's FLOP/s is the peak measured.

    Why measured and not typed: a datasheet's peak assumes every unit busy at the top clock, which a real
    product of a given size and this machine's load may not reach; a step's utilisation is honest only against
    what this machine can do now. The sweep runs ``rounds`` times and each size keeps its fastest round: on a
    shared machine another program can hold a core for a whole round (two threads on two busy cores then wait
    for each other at every product: 10x slower, with a tiny spread), and a speed of light is what the machine
    *can* do. The size with the highest FLOP/s wins; its spread is kept."""
    device = torch.device(device)

    def make(n: int, d: torch.device) -> Callable[[], Any]:
        a, b = torch.randn(n, n, device=d, dtype=dtype), torch.randn(n, n, device=d, dtype=dtype)
        return lambda: a @ b

    sizes = list(sizes)
    best: dict[int, bench.Timing] = {}
    with matmul_precision(tf32):
        for _round in range(rounds):
            for n in sizes:
                t = bench.time_callable(make(n, device), device, min_run_time=min_run_time, warn=False,
                                        label=f"matmul n={n}", **bench.matmul_work(n))
                if n not in best or t.median < best[n].median:
                    best[n] = t
    top = max(sizes, key=lambda n: best[n].flops_per_s or 0.0)
    return Peak(best[top].flops_per_s or 0.0, top, best[top], dtype, tf32)


# --------------------------------------------------------------------------- the ladder


@dataclasses.dataclass(frozen=True)
class Rung:
    """One rung: every change of the rungs below it, and one more (``change``)."""

    name: str
    change: str = ""
    sync_free: bool = False  #: losses kept on the device, read once after the steps (chapter 08)
    fed: bool = False  #: a loader with pinned memory and workers that prefetch, copies non_blocking (chapter 04)
    tf32: bool = False  #: float32 products on TF32 tensor cores: torch.set_float32_matmul_precision("high")
    amp_dtype: torch.dtype | None = None  #: autocast in this dtype (chapter 05); a GradScaler when float16
    fused: bool = False  #: AdamW(fused=True): one kernel for the whole update
    sdpa: bool = False  #: F.scaled_dot_product_attention in place of the written-out attention
    compiled: bool = False  #: torch.compile of the model (its backward too, through AOTAutograd)


def slug(name: str) -> str:
    """A rung's name as a key of stored figures: ``"fused AdamW"`` -> ``"fused_adamw"``."""
    return "".join(c if c.isalnum() else "_" for c in name.lower())


def ladder(amp_dtype: torch.dtype) -> list[Rung]:
    """The chapter's rungs in order, each adding one change to the one below."""
    # the names are keys of stored figures (slug) and shown translated (tr(run.rung.name)): N_ marks them for that
    rungs = [Rung(N_("plain fp32"))]
    for name, change in ((N_("sync-free"), {"sync_free": True}), (N_("fed loader"), {"fed": True}),
                         (N_("TF32"), {"tf32": True}), (N_("autocast"), {"amp_dtype": amp_dtype}),
                         (N_("fused AdamW"), {"fused": True}), (N_("SDPA"), {"sdpa": True}),
                         (N_("compiled"), {"compiled": True})):
        rungs.append(dataclasses.replace(rungs[-1], name=name, change=name, **change))
    return rungs


def train_steps(model: nn.Module, optimizer: torch.optim.Optimizer, batches: Iterable[Any], device: torch.device,
                rung: Rung, scaler: Any = None) -> list[float]:
    """The training loop every rung runs; returns the losses (Python floats). What ``rung`` changes, and only that:

    ``sync_free`` keeps each loss on the device and reads them all once, after the loop (else ``.item()`` per
    step); ``fed`` copies batches with ``non_blocking=True`` (from the pinned memory its loader gives); ``tf32``
    lets float32 products use TF32 (and only for these steps: see :func:`matmul_precision`); ``amp_dtype`` runs
    forward and loss under ``torch.autocast`` (with ``scaler``, a GradScaler, for float16)."""
    sys.audit("course.version", "helpers.ladder:train_steps")  # the grader: no exercise passes by calling this
    with matmul_precision(rung.tf32):
        return _train_steps(model, optimizer, batches, device, rung, scaler)


def _train_steps(model: nn.Module, optimizer: torch.optim.Optimizer, batches: Iterable[Any], device: torch.device,
                 rung: Rung, scaler: Any) -> list[float]:
    losses: list[Any] = []
    precision = (torch.autocast(device.type, dtype=rung.amp_dtype) if rung.amp_dtype is not None
                 else contextlib.nullcontext())
    for x, y in batches:
        x, y = x.to(device, non_blocking=rung.fed), y.to(device, non_blocking=rung.fed)
        optimizer.zero_grad(set_to_none=True)
        with precision:
            loss = F.cross_entropy(model(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        losses.append(loss.detach() if rung.sync_free else loss.item())
    return torch.stack(losses).tolist() if rung.sync_free and losses else losses


@dataclasses.dataclass
class RungRun:
    """What one rung needs to run its steps: model, optimizer, loader; and what compiling it cost."""

    rung: Rung
    model: nn.Module
    optimizer: torch.optim.Optimizer
    loader: Any
    scaler: Any = None
    compile_s: float | None = None  #: the first (compiling) epoch less a steady one, when compiled
    timing: bench.Timing | None = None

    def epoch(self, device: torch.device) -> list[float]:
        return train_steps(self.model, self.optimizer, self.loader, device, self.rung, self.scaler)


def _build(rung: Rung, data: TensorDataset, device: torch.device, batch: int, dim: int, seed: int,
           workers: int) -> RungRun:
    torch.manual_seed(seed)
    model: nn.Module = Block(dim=dim, sdpa=rung.sdpa).to(device)
    # below the fused rung, torch's default AdamW, as a first training loop gets it: a loop over the parameters on
    # a CPU, foreach (a few multi-tensor kernels) on CUDA; the fused rung is the change against that default
    options = {"fused": True} if rung.fused else {}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, **options)
    cuda = device.type == "cuda"
    extra = {"num_workers": workers, "persistent_workers": True, "prefetch_factor": 2} if rung.fed and workers else {}
    loader = DataLoader(data, batch_size=batch, shuffle=False, drop_last=True, pin_memory=rung.fed and cuda, **extra)
    scaler = torch.amp.GradScaler(device.type) if rung.amp_dtype == torch.float16 else None
    if rung.compiled:
        model = torch.compile(model)
    return RungRun(rung, model, optimizer, loader, scaler)


def climb(rungs: list[Rung], data: TensorDataset, device: str | torch.device, *, batch: int, dim: int,
          repeats: int = 7, seed: int = 0, workers: int = 0,
          progress: Callable[[str], None] | None = None) -> list[RungRun]:
    """Time one epoch of ``data`` (its batches of ``batch``) on every rung; ``repeats`` rounds, rungs interleaved.

    Each rung gets its own model (same seed), optimizer and loader. A compiled rung's first epoch compiles: it
    is timed apart (``compile_s``: that epoch less the steady median) and never counted as a repeat. Every
    rung has one untimed epoch first (the optimizer's state, the allocator's cache, the workers' start)."""
    device = torch.device(device)
    runs = [_build(r, data, device, batch, dim, seed, workers) for r in rungs]
    first: dict[int, float] = {}
    for i, run in enumerate(runs):
        if progress is not None:
            progress(run.rung.name)
        synchronize(device)
        start = time.perf_counter()
        run.epoch(device)
        synchronize(device)
        first[i] = time.perf_counter() - start
    times: list[list[float]] = [[] for _ in runs]
    for _round in range(repeats):
        for i, run in enumerate(runs):
            synchronize(device)
            start = time.perf_counter()
            run.epoch(device)
            synchronize(device)
            times[i].append(time.perf_counter() - start)
    for i, run in enumerate(runs):
        run.timing = bench.Timing.from_times(times[i], device, label=_(run.rung.name))  # shown in verdicts
        if run.rung.compiled:
            run.compile_s = max(first[i] - run.timing.median, 0.0)
    return runs


