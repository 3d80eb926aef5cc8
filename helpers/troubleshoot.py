"""Cause the usual GPU errors on purpose, read them, and watch a training run.

Chapter 07 (troubleshooting) teaches this module. Five parts:

* **Errors**: :data:`MISTAKES` reproduces each classic mistake on the CPU
  (where the error is plain: ``IndexError: Target 10 is out of bounds.``), and
  :func:`explain_error` names an error's cause and fix. On CUDA the same
  out-of-range label surfaces as an asynchronous "device-side assert", whose
  text is in :data:`CUDA_TEXTS` (quoted from the PyTorch issues it comes
  from); :func:`cuda_assert_in_subprocess` reproduces it for real on a GPU, in
  a child process, because it breaks the CUDA context of the process it
  happens in.
* **Out of memory**: :data:`OOM_FORMAT` is the shape of torch's CUDA message
  (placeholders, no numbers), :func:`oom_lines` reads one sentence by
  sentence, :func:`forget_last_error` drops what IPython keeps of the last
  error so its tensors can be freed.
* **NaN and Inf**: :func:`nonfinite_grads` says which parameters' gradients
  are not finite; :func:`stop_at_nonfinite` raises at the first module whose
  output is not finite (forward hooks); :func:`train_losses` runs a short
  regression whose loss diverges at a large learning rate (and not with
  clipping or a smaller one).
* **Watching the device**: :func:`nvml_readings` (NVML through
  ``nvidia-ml-py``, behind a guard), :func:`cpu_readings` (psutil: the CPU's
  own figures, the analogue on a machine without a GPU).
* **Profiler and TensorBoard**: :class:`SlowDataset` (a data-loading
  bottleneck to find), :func:`region_totals` / :func:`slowest_region` (read
  a Chrome trace), :func:`region_timings` (each region's calls as a Timing,
  for the course's conclusions), :func:`region_device_times` (the device work
  launched in each region, from any thread), :func:`device_activity` (the
  device's busy time and idle gaps), :func:`profile_regions`, :func:`log_training`
  (SummaryWriter: loss, throughput, memory), :func:`read_scalars`
  (EventAccumulator) and :func:`serve_tensorboard` (a server that is stopped
  when the block ends).

C++ code (the profiler's Kineto) writes straight to file descriptor 2, past
Python's ``sys.stderr``; in a notebook that lands as red noise.
:func:`native_stderr` captures it so a chapter can show and explain it.
(``helpers.memory`` silences the same lines privately; this one keeps them.)
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset

from helpers import benchmark
from helpers import device as dev
from helpers import errors
from helpers import memory
from helpers.i18n import N_, _

__all__ = [
    "DeviceActivity",
    "device_activity",
    "CUDA_TEXTS",
    "CapturedStderr",
    "Diagnosis",
    "GpuReading",
    "MISTAKES",
    "OOM_FORMAT",
    "SlowDataset",
    "cpu_readings",
    "cuda_assert_in_subprocess",
    "cuda_memory_report",
    "explain_error",
    "forget_last_error",
    "log_training",
    "nonfinite_grads",
    "numbered_class_batches",
    "nvml_readings",
    "oom_lines",
    "profile_regions",
    "read_scalars",
    "region_device_timings",
    "region_device_times",
    "region_timings",
    "region_totals",
    "reproduce",
    "runs_folder",
    "serve_tensorboard",
    "slowest_region",
    "stop_at_nonfinite",
    "train_losses",
]


# --------------------------------------------------------------------------- native stderr


# the course's one fd-2 capture lives in helpers.memory (track_memory filters the same lines out)
CapturedStderr = memory.CapturedStderr
native_stderr = memory.native_stderr


def runs_folder(name: str) -> Path:
    """A folder for this chapter's traces and TensorBoard logs, outside the course's own folders.

    ``COURSE_RUNS`` chooses the parent (default: the system's temporary
    folder), so a run never adds files to ``solutions/`` or ``notebooks/``.
    """
    root = Path(os.environ.get("COURSE_RUNS") or Path(tempfile.gettempdir()) / "gpu-course-runs")
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# --------------------------------------------------------------------------- errors: reproduce and explain


def _ce_label_too_big() -> Any:
    return nn.functional.cross_entropy(torch.randn(4, 10), torch.tensor([1, 2, 10, 3]))


def _ce_label_negative() -> Any:
    return nn.functional.cross_entropy(torch.randn(4, 10), torch.tensor([1, -5, 2, 3]))


def _embedding_index() -> Any:
    return nn.Embedding(10, 3)(torch.tensor([3, 10]))


def _tensor_index() -> Any:
    return torch.arange(5)[torch.tensor([7])]


def _bce_outside() -> Any:
    return nn.BCELoss()(torch.tensor([0.2, 1.5]), torch.tensor([0.0, 1.0]))


def _float_targets() -> Any:
    return nn.functional.cross_entropy(torch.randn(4, 10), torch.tensor([1.0, 2.0, 3.0, 4.0]))


def _dtype_mix() -> Any:
    return nn.Linear(3, 4)(torch.randn(2, 3, dtype=torch.float64))


def _shape_mix() -> Any:
    return nn.Linear(3, 4)(torch.randn(2, 5))


def _batch_mix() -> Any:
    return nn.functional.cross_entropy(torch.randn(4, 10), torch.tensor([1, 2, 3]))  # 4 predictions, 3 labels


def _device_mix() -> Any:
    return nn.Linear(3, 4).to("meta")(torch.randn(2, 3))  # meta stands in for a second device


#: name -> (what the mistake is, a function that makes it on the CPU)
MISTAKES: dict[str, tuple[str, Callable[[], Any]]] = {
    "label >= classes": ("a label 10 with 10 classes (labels must be 0..9)", _ce_label_too_big),
    "negative label": ("a label -5", _ce_label_negative),
    "embedding index": ("index 10 into an Embedding of 10 rows", _embedding_index),
    "tensor index": ("index 7 into a tensor of 5 elements", _tensor_index),
    "BCELoss outside [0, 1]": ("BCELoss given 1.5, which is not a probability", _bce_outside),
    "float targets": ("class targets as floats, not integers", _float_targets),
    "dtype mismatch": ("a float64 input to a float32 layer", _dtype_mix),
    "shape mismatch": ("5 features into a layer that expects 3", _shape_mix),
    "batch size mismatch": ("4 predictions but 3 labels (a ValueError, not a RuntimeError)", _batch_mix),
    "device mismatch": ("the model on another device than its input (meta stands in)", _device_mix),
}


def reproduce(name: str) -> BaseException:
    """Make the mistake ``name`` (a key of :data:`MISTAKES`) and return the exception torch raised."""
    if name not in MISTAKES:
        raise KeyError(_("no mistake called {name!r}; choose one of {names}").format(name=name, names=sorted(MISTAKES)))
    try:
        MISTAKES[name][1]()
    except Exception as err:  # noqa: BLE001 - the exception is the result
        return err
    raise AssertionError(f"{name!r} raised nothing: torch's behaviour changed, update MISTAKES")


#: Texts CUDA prints, quoted from the PyTorch issues cited (never produced on this machine).
CUDA_TEXTS: dict[str, dict[str, str]] = {
    "device-side assert": {
        "source": "pytorch/pytorch#18014 (a cross-entropy label out of range on CUDA)",
        "text": (
            "Assertion `t >= 0 && t < n_classes` failed.\n"
            "RuntimeError: CUDA error: device-side assert triggered\n"
            "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
            "below might be incorrect.\n"
            "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
            "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."
        ),
    },
    "broken context": {
        "source": "pytorch/pytorch#2300 (every CUDA call after a device-side assert fails)",
        "text": "RuntimeError: CUDA error: device-side assert triggered",
    },
}


#: The course's one reading of an error (helpers.errors): chapter 02's explain_device_error reads the same table.
Diagnosis = errors.Diagnosis


def explain_error(err: BaseException | str) -> Diagnosis | None:
    """The :class:`Diagnosis` of an exception (or its text), or None when it is none of the usual ones.

    Read from the message, not the type: torch raises RuntimeError for most
    of these, and a CUDA error reaches you only as text. A
    ``torch.OutOfMemoryError`` is memory whatever it says. The rules, in
    order, are :data:`helpers.errors.RULES`.
    """
    sys.audit("course.version", "helpers.troubleshoot:explain_error")  # the grader: no exercise passes by calling this
    return errors.diagnosis_of(err)


def cuda_assert_in_subprocess(blocking: bool = True, timeout: float = 120.0,
                              device: str | torch.device | None = None) -> str:
    """Trigger a real device-side assert on CUDA in a child process; return what it printed.

    The child sets ``CUDA_LAUNCH_BLOCKING`` before CUDA starts (too late
    once it has), makes the out-of-range-label mistake, then tries one more
    CUDA call to show the context stays broken. Run in a child because the
    assert breaks the CUDA context of its process until it exits. Raises
    RuntimeError on a machine without CUDA. ``device`` is the GPU the child
    uses (``cuda:1``); by default ``cuda``, the child's first GPU.
    """
    if not torch.cuda.is_available():
        raise RuntimeError(_("cuda_assert_in_subprocess needs a CUDA GPU; this machine has none"))
    # the child prints labels the learner reads: translated here, handed to the child as Python literals
    said = {key: repr(text) for key, text in {
        "lazy": _("loss computed lazily; reading it:"), "first": _("FIRST ERROR:"),
        "worked": _("AFTERWARDS: a new CUDA call worked"), "broken": _("AFTERWARDS, a fresh torch.ones on CUDA:"),
    }.items()}
    gpu = repr(str(torch.device(device if device is not None else "cuda")))
    code = (
        "import torch\n"
        f"logits = torch.randn(4, 10, device={gpu})\n"
        f"labels = torch.tensor([1, 2, 10, 3], device={gpu})\n"
        "try:\n"
        "    loss = torch.nn.functional.cross_entropy(logits, labels)\n"
        f"    print({said['lazy']}, flush=True)\n"
        "    print(loss.item())\n"
        "except RuntimeError as err:\n"
        f"    print({said['first']}, err, flush=True)\n"
        "try:\n"
        f"    torch.ones(1, device={gpu}) + 1\n"
        f"    torch.cuda.synchronize({gpu})\n"
        f"    print({said['worked']})\n"
        "except RuntimeError as err:\n"
        f"    print({said['broken']}, str(err).splitlines()[0])\n"
    )
    # UTF-8 both ways: the labels may be Korean, whatever the console's own encoding is (cp949 on Windows)
    env = {**os.environ, "CUDA_LAUNCH_BLOCKING": "1" if blocking else "0", "PYTHONIOENCODING": "utf-8"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, encoding="utf-8",
                          errors="replace", env=env, timeout=timeout)
    return (done.stdout + done.stderr).strip()


# --------------------------------------------------------------------------- out of memory

#: The shape of torch's CUDA out-of-memory message (recent versions), with placeholders for its
#: numbers: this is the format torch prints, no number in it was measured. Its text and link are those in
#: libc10_cuda.so of torch 2.11+cu130 (the floor), read with `strings`.
OOM_FORMAT = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate <A MiB>. GPU 0 has a total capacity of "
    "<T GiB> of which <F MiB> is free. Including non-PyTorch memory, this process has <P GiB> memory in use. "
    "Of the allocated memory <X GiB> is allocated by PyTorch, and <R MiB> is reserved by PyTorch but "
    "unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
    "Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)"
)

#: (a fragment of torch's sentence, what it tells you): the fragments are torch's words, the meanings are shown
_OOM_MEANINGS = [
    ("Tried to allocate", N_("the one allocation that failed: often small; what matters is what was already held")),
    ("total capacity", N_("the GPU's memory, and how much of it was free at that moment (other processes count "
                          "too)")),
    ("Process", N_("another process on the same GPU holds this much (nvidia-smi lists it)")),
    ("this process has", N_("everything this process holds: tensors, the allocator's cache and the CUDA context")),
    ("allocated by PyTorch", N_("live tensors (torch.cuda.memory_allocated) and the allocator's unused cache "
                                "(reserved - allocated): a large cache means fragmentation")),
    ("expandable_segments", N_("the fix for fragmentation: set PYTORCH_ALLOC_CONF (or the older name the "
                               "message uses, PYTORCH_CUDA_ALLOC_CONF: torch reads both) before CUDA starts")),
    ("See documentation", N_("the allocator's settings, documented")),
    ("CUDA out of memory", N_("the exception: torch.OutOfMemoryError, a RuntimeError you can catch")),
]


def oom_lines(text: str) -> list[tuple[str, str]]:
    """Split an out-of-memory message into sentences, each with what it tells you (in the learner's language)."""
    sentences = [s.strip() for s in text.replace(".  ", ". ").split(". ") if s.strip()]
    out = []
    for sentence in sentences:
        meaning = next((_(m) for key, m in _OOM_MEANINGS if key in sentence), "")
        out.append((sentence.rstrip(".") + ".", meaning))
    return out


def cuda_memory_report(device: str | torch.device | None = None) -> str:
    """``mem_get_info`` and an abbreviated ``memory_summary`` on CUDA; on other devices, what is missing."""
    d = torch.device(device) if device is not None else dev.pick_device()
    if d.type != "cuda" or not torch.cuda.is_available():
        return _("no CUDA device here ({device}): torch.cuda.mem_get_info() raises on a CPU-only build and "
                 "torch.cuda.memory_summary() has no statistics to print; on a GPU they show the free/total "
                 "memory and the caching allocator's allocated/reserved table.").format(device=d)
    free, total = torch.cuda.mem_get_info(d)
    head = _("mem_get_info: {free} free of {total} on {device}").format(
        free=memory.format_bytes(free), total=memory.format_bytes(total), device=d)
    return head + "\n" + torch.cuda.memory_summary(d, abbreviated=True)


def forget_last_error() -> list[str]:
    """Drop what Python and IPython keep of the last uncaught error, so the tensors it holds can be freed.

    After an error reaches the top of a notebook cell, ``sys.last_value``,
    ``sys.last_traceback`` (and ``sys.last_exc`` on 3.12+) and IPython's
    ``InteractiveTB.tb`` keep its traceback, whose frames keep every tensor
    they held. Returns the names it cleared. Call :func:`helpers.memory.free_memory`
    afterwards.
    """
    cleared = []
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        if getattr(sys, name, None) is not None:
            setattr(sys, name, None)
            cleared.append(f"sys.{name}")
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with the course
        return cleared
    shell = get_ipython()
    tb = getattr(shell, "InteractiveTB", None)
    if tb is not None and getattr(tb, "tb", None) is not None:
        tb.tb = None
        cleared.append("InteractiveTB.tb")
    return cleared


# --------------------------------------------------------------------------- NaN and Inf


def nonfinite_grads(model: nn.Module) -> list[str]:
    """Names of the parameters whose gradient holds a NaN or an Inf (``torch.isfinite``)."""
    return [name for name, p in model.named_parameters()
            if p.grad is not None and not bool(torch.isfinite(p.grad).all())]


@contextlib.contextmanager
def stop_at_nonfinite(model: nn.Module) -> Iterator[None]:
    """While the block runs, raise at the first module of ``model`` whose output holds a NaN or an Inf.

    The error is a :class:`helpers.errors.NonFiniteError` (a RuntimeError), which :func:`explain_error` reads
    as ``nan`` in either language.

    A forward hook on every module (``register_forward_hook``) checks its
    output with ``torch.isfinite``. Hooks run as each module finishes, inner
    modules before the containers around them, so the error names the module
    where the first non-finite value appeared, not the loss far downstream.
    Forward only: a NaN born in backward is anomaly mode's job. The hooks are
    removed when the block ends, on error too.
    """
    def hook(name: str) -> Callable[[nn.Module, Any, Any], None]:
        def check(module: nn.Module, args: Any, output: Any) -> None:
            outputs = output if isinstance(output, (tuple, list)) else (output,)
            for out in outputs:
                if isinstance(out, torch.Tensor) and out.is_floating_point() and not bool(torch.isfinite(out).all()):
                    bad = "NaN" if bool(torch.isnan(out).any()) else "Inf"
                    # a type of its own: explain_error says "nan" whatever language the message is in
                    raise errors.NonFiniteError(_(
                        "non-finite output ({bad}) from module {name!r} ({kind}): the first one whose output is not "
                        "finite").format(bad=bad, name=name, kind=type(module).__name__))
        return check

    handles = [m.register_forward_hook(hook(name or type(model).__name__)) for name, m in model.named_modules()]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def train_losses(model: nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float, steps: int = 20,
                 clip: float | None = None) -> list[float]:
    """Full-batch SGD on MSE for ``steps`` steps; the loss after each (``nan``/``inf`` kept as they come).

    With ``clip``, gradients are clipped to that total norm first
    (``clip_grad_norm_``), the source's remedy for exploding gradients.
    """
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _step in range(steps):  # not `_`: that name translates in this module
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        losses.append(loss.item())
    return losses


def numbered_class_batches(n_batches: int = 4, batch_size: int = 32, features: int = 8, classes: int = 4,
                           seed: int = 0, scale: float = 1.0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Batches ``(x, y)`` of a learnable classification task whose classes are numbered 1..``classes``.

    Numbered from 1, as class ids in a CSV file often are: fed straight to
    a cross-entropy loss, which wants 0..C-1, the highest label is out of
    range. ``scale`` multiplies the features (a large one makes huge logits).
    """
    if min(n_batches, batch_size, features, classes) <= 0:
        raise ValueError(_("n_batches, batch_size, features and classes must all be positive"))
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(features, classes, generator=g)
    x = torch.randn(n_batches * batch_size, features, generator=g)
    y = (x @ w).argmax(dim=1) + 1
    x = x * scale
    return [(x[i:i + batch_size], y[i:i + batch_size]) for i in range(0, len(x), batch_size)]


# --------------------------------------------------------------------------- watching the device


@dataclasses.dataclass(frozen=True)
class GpuReading:
    """One GPU as NVML sees it: utilisation in percent of the last sample period, memory in bytes."""

    index: int
    name: str
    gpu_percent: int
    memory_percent: int
    used_bytes: int
    total_bytes: int


def nvml_readings() -> list[GpuReading]:
    """Every GPU's utilisation and memory through NVML (``nvidia-ml-py``, imported as ``pynvml``).

    Raises ``pynvml.NVMLError`` (``NVMLError_LibraryNotFound`` without an
    NVIDIA driver) for the caller to catch; NVML is always shut down again.
    """
    import pynvml

    pynvml.nvmlInit()
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            util = pynvml.nvmlDeviceGetUtilizationRates(h)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            out.append(GpuReading(i, name.decode() if isinstance(name, bytes) else str(name), int(util.gpu),
                                  int(util.memory), int(mem.used), int(mem.total)))
        return out
    finally:
        pynvml.nvmlShutdown()


def cpu_readings(work: Callable[[], Any]) -> dict[str, Any]:
    """CPU utilisation while ``work()`` runs, and this process's memory: psutil, the CPU's own figures.

    ``cpu_percent`` per core over the call (psutil counts from its previous
    call, so one is made first), the mean over cores, and the resident set
    size of this process before and after.
    """
    import psutil

    proc = psutil.Process()
    rss_before = proc.memory_info().rss
    psutil.cpu_percent(interval=None, percpu=True)
    work()
    per_core = psutil.cpu_percent(interval=None, percpu=True)
    return {"per_core": per_core, "mean": sum(per_core) / max(1, len(per_core)),
            "rss_before": rss_before, "rss_after": proc.memory_info().rss}


# --------------------------------------------------------------------------- profiler


class SlowDataset(Dataset):
    """Random features and learnable class labels (0..classes-1), with ``delay_s`` of waiting per item.

    The wait stands in for reading and decoding a file; it makes the data
    loading the slowest part of a step, a bottleneck to find in a trace
    (chapter 04 shows how workers hide it).
    """

    def __init__(self, n: int = 64, features: int = 32, classes: int = 4, delay_s: float = 0.002, seed: int = 0):
        if n <= 0 or delay_s < 0:
            raise ValueError(_("n must be positive and delay_s not negative, got n={n}, delay_s={delay_s}").format(
                n=n, delay_s=delay_s))
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, features, generator=g)
        self.y = (self.x @ torch.randn(features, classes, generator=g)).argmax(dim=1)  # learnable labels
        self.delay_s = delay_s

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(self.delay_s)
        return self.x[i], self.y[i]


def _trace_events(trace: str | Path | Mapping) -> list[dict]:
    if isinstance(trace, Mapping):
        data = trace
    else:
        with open(trace) as f:
            data = json.load(f)
    events = data.get("traceEvents") if isinstance(data, Mapping) else None
    if not isinstance(events, list):
        raise ValueError(_("{trace!s:.80} is not a Chrome trace: it has no 'traceEvents' list").format(trace=trace))
    return events


def region_totals(trace: str | Path | Mapping, names: list[str] | None = None) -> dict[str, float]:
    """Milliseconds spent in each ``record_function`` region of a Chrome trace, summed over calls.

    Regions are the trace's ``user_annotation`` events (what
    ``record_function`` writes); ``names`` keeps only those, and one that
    never appears reports 0.
    """
    sys.audit("course.version", "helpers.troubleshoot:region_totals")  # the grader: no exercise passes by calling this
    totals: dict[str, float] = {} if names is None else {n: 0.0 for n in names}
    for e in _trace_events(trace):
        if e.get("cat") != "user_annotation" or e.get("ph") != "X":
            continue
        name = e.get("name", "")
        if names is None or name in totals:
            totals[name] = totals.get(name, 0.0) + float(e.get("dur", 0.0)) / 1000.0
    return totals


def region_timings(trace: str | Path | Mapping, names: list[str]) -> dict[str, benchmark.Timing]:
    """Each ``record_function`` region of a Chrome trace as a :class:`helpers.benchmark.Timing`: one repeat per call.

    A profiled loop calls each region once per recorded step, so every step is
    a repeat and the median and IQR say how steady a region was; then
    :func:`helpers.benchmark.describe_leader` names the slowest region only
    when it is slower than the others beyond the noise. (The totals of
    :func:`region_totals` hide that: three steps of a busy machine once named
    data, backward and data in three runs.)
    """
    calls: dict[str, list[float]] = {n: [] for n in names}
    for e in _trace_events(trace):
        if e.get("cat") == "user_annotation" and e.get("ph") == "X" and e.get("name") in calls:
            calls[e["name"]].append(float(e.get("dur", 0.0)) / 1e6)
    return {n: benchmark.Timing.from_times(times or [float("nan")], label=n) for n, times in calls.items()}


#: Chrome-trace categories of work the device itself did (kineto's names): kernels, copies, memsets.
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


@dataclasses.dataclass
class DeviceActivity:
    """How busy the device was over a profiled window, from a Chrome trace; ``None`` fields without one.

    ``window_s`` runs from the first recorded step's start (``ProfilerStep#N``,
    a CPU span) to whichever ends last, that step or the device's last kernel
    (kernels run after the CPU queued them). ``busy_s`` is the union of the
    device's kernels, copies and memsets in it: kernels that overlap count
    once. ``gaps`` are the stretches with none, ``(offset from the window's
    start, length)`` in seconds, longest first: time the device waited for the
    host (data, Python, launches).
    """

    window_s: float
    busy_s: float
    device_events: int
    gaps: list[tuple[float, float]]

    @property
    def idle_s(self) -> float:
        return max(0.0, self.window_s - self.busy_s)

    @property
    def busy_fraction(self) -> float:
        return self.busy_s / self.window_s if self.window_s > 0 else float("nan")


def device_activity(trace: str | Path | Mapping, step_prefix: str = "ProfilerStep#") -> DeviceActivity:
    """The device's busy time and idle gaps over the recorded steps of a Chrome trace (see :class:`DeviceActivity`).

    A profile of the CPU alone has no device events: then ``device_events``
    is 0 and ``busy_s`` 0, and there is nothing to say about a device.
    Without ``ProfilerStep`` spans (no ``schedule``) the window is the
    device's own first-to-last event.
    """
    events = _trace_events(trace)
    device = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0))) for e in events
                    if e.get("cat") in DEVICE_CATEGORIES and e.get("ph") == "X" and "ts" in e)
    steps = [(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0))) for e in events
             if e.get("ph") == "X" and str(e.get("name", "")).startswith(step_prefix) and "ts" in e]
    if not device:
        window = (max(b for _, b in steps) - min(a for a, _ in steps)) / 1e6 if steps else 0.0
        return DeviceActivity(window_s=window, busy_s=0.0, device_events=0, gaps=[])
    start = min(a for a, _ in steps) if steps else device[0][0]
    end = max([b for _, b in steps] + [device[-1][1]])
    merged: list[list[float]] = []
    for a, b in device:
        a, b = max(a, start), min(b, end)
        if b <= a:
            continue
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    busy = sum(b - a for a, b in merged)
    gaps, cursor = [], start
    for a, b in merged:
        if a > cursor:
            gaps.append(((cursor - start) / 1e6, (a - cursor) / 1e6))
        cursor = max(cursor, b)
    if end > cursor:
        gaps.append(((cursor - start) / 1e6, (end - cursor) / 1e6))
    gaps.sort(key=lambda g: g[1], reverse=True)
    return DeviceActivity(window_s=(end - start) / 1e6, busy_s=busy / 1e6, device_events=len(device), gaps=gaps)


#: Chrome-trace categories of the host calls that queue device work (kineto's names): the CUDA runtime's
#: ``cudaLaunchKernel``, ``cudaMemcpyAsync``... and the driver's ``cuLaunchKernel`` (Triton's kernels).
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")


def region_device_times(trace: str | Path | Mapping, names: list[str] | None = None) -> dict[str, float]:
    """Seconds of device work (kernels, copies, memsets) launched inside each ``record_function`` region.

    Each device event of the trace is linked to the host call that queued it
    (a ``cuda_runtime`` or ``cuda_driver`` event: the same
    ``args["correlation"]`` number), and counted for every region whose CPU
    span contains that launch, **whichever thread launched it**. That is the
    point: on CUDA, autograd runs ``backward`` on a worker thread of its own per
    device, while the thread that opened the ``backward`` region waits in
    ``loss.backward()``; the profiler's own device columns
    (``key_averages()``'s ``device_time_total``) link a region only to
    operators on its own thread, and give ``backward`` almost nothing.

    Summed over a region's calls, as the profiler's device columns are
    (kernels that overlap on two streams count twice); a region nested in
    another counts for both. Device work launched outside every region counts
    for none, and so does work whose launch is missing from the trace. A
    region that never ran, or a trace of the CPU alone, reports 0. Only
    time says where a launch belongs: two threads that each launch kernels
    inside regions of their own at the same moment would share them.
    """
    return {name: sum(times) for name, times in _region_device_calls(trace, names).items()}


def _region_device_calls(trace: str | Path | Mapping, names: list[str] | None) -> dict[str, list[float]]:
    """Device seconds launched inside each call of each region, in the trace's order (see :func:`region_device_times`)."""
    events = _trace_events(trace)
    device_s: dict[Any, float] = {}  # correlation -> seconds of device work it queued
    for e in events:
        if e.get("cat") in DEVICE_CATEGORIES and e.get("ph") == "X":
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None:
                device_s[corr] = device_s.get(corr, 0.0) + float(e.get("dur", 0.0)) / 1e6
    launches = sorted((float(e["ts"]), device_s[corr]) for e in events
                      if e.get("cat") in LAUNCH_CATEGORIES and e.get("ph") == "X" and "ts" in e
                      and (corr := (e.get("args") or {}).get("correlation")) is not None and corr in device_s)
    starts = [t for t, _s in launches]
    running = [0.0]  # running[i]: device seconds of the first i launches
    for _t, seconds in launches:
        running.append(running[-1] + seconds)
    calls: dict[str, list[float]] = {} if names is None else {n: [] for n in names}
    for e in events:
        if e.get("cat") != "user_annotation" or e.get("ph") != "X" or "ts" not in e:
            continue
        name = e.get("name", "")
        if names is not None and name not in calls:
            continue
        begin = float(e["ts"])
        first, last = bisect.bisect_left(starts, begin), bisect.bisect_right(starts, begin + float(e.get("dur", 0.0)))
        calls.setdefault(name, []).append(running[last] - running[first])
    return calls


def region_device_timings(trace: str | Path | Mapping, names: list[str]) -> dict[str, benchmark.Timing]:
    """Each region's device time (:func:`region_device_times`) as a :class:`helpers.benchmark.Timing`: one repeat per
    call, as :func:`region_timings` has for the host's spans, so the slowest region on the *device* is named by the
    course's one rule (chapter 09 ranks its step's regions so on a GPU). A region that never ran is left out."""
    calls = _region_device_calls(trace, names)
    return {name: benchmark.Timing.from_times(times, "cuda", label=name) for name, times in calls.items() if times}


def slowest_region(trace: str | Path | Mapping, names: list[str] | None = None) -> str:
    """The region of :func:`region_totals` with the most time."""
    sys.audit("course.version", "helpers.troubleshoot:slowest_region")  # the grader: no exercise passes by calling this
    totals = region_totals(trace, names)
    if not totals:
        raise ValueError(_("the trace has no record_function regions: wrap the step's parts in "
                           "record_function(name)"))
    return max(totals, key=totals.get)


def profile_regions(regions: Mapping[str, Callable[[], Any]], trace_path: str | Path) -> str:
    """Run each region once under ``record_function(name)`` in a CPU profile; export the trace; the slowest.

    Chapter 07's exercise asks you to write this yourself.
    """
    sys.audit("course.version", "helpers.troubleshoot:profile_regions")  # the grader: no exercise passes by calling this
    from torch.profiler import ProfilerActivity, profile, record_function

    with native_stderr():
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for name, fn in regions.items():
                with record_function(name):
                    fn()
        prof.export_chrome_trace(str(trace_path))
    return slowest_region(trace_path, list(regions))


# --------------------------------------------------------------------------- TensorBoard


def log_training(writer: Any, model: nn.Module, optimizer: torch.optim.Optimizer, loader: Any,
                 device: torch.device, epochs: int = 1,
                 loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = nn.functional.cross_entropy) -> int:
    """Train and log each step to ``writer`` (a SummaryWriter): loss, samples/s, peak memory. Returns steps.

    Throughput comes from a clock that synchronises the device
    (:func:`helpers.benchmark.sync_timer`), peak memory from
    :func:`helpers.memory.track_memory` (allocator statistics on CUDA, live
    tensors elsewhere).
    """
    clock = benchmark.sync_timer(device)
    method = "cuda" if device.type == "cuda" else "tensors"
    step = 0
    model.to(device).train()
    for _epoch in range(epochs):  # not `_`: that name translates in this module
        for x, y in loader:
            start = clock()
            with memory.track_memory(device, method=method) as mem:
                x, y = x.to(device), y.to(device)
                optimizer.zero_grad(set_to_none=True)
                loss = loss_fn(model(x), y)
                loss.backward()
                optimizer.step()
            seconds = clock() - start
            writer.add_scalar("loss/train", loss.item(), step)
            writer.add_scalar("throughput/samples_per_s", len(x) / max(seconds, 1e-9), step)
            writer.add_scalar("memory/peak_MiB", mem.peak_bytes / 2**20, step)
            step += 1
    writer.flush()
    return step


def read_scalars(logdir: str | Path, tag: str) -> list[tuple[int, float]]:
    """``(step, value)`` pairs of ``tag`` from the event files in ``logdir`` (TensorBoard's EventAccumulator)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir))
    acc.Reload()
    if tag not in acc.Tags().get("scalars", []):
        raise KeyError(_("no scalar {tag!r} in {logdir}; it has {tags}").format(
            tag=tag, logdir=logdir, tags=acc.Tags().get("scalars", [])))
    return [(e.step, e.value) for e in acc.Scalars(tag)]


@contextlib.contextmanager
def serve_tensorboard(logdir: str | Path, timeout: float = 60.0) -> Iterator[str]:
    """Start a TensorBoard server on ``logdir`` on a free port; yield its URL; stop it when the block ends.

    What ``%tensorboard --logdir`` does inside JupyterLab, minus the server
    left running: this one is terminated (and waited for) on exit, on error
    too.
    """
    cmd = [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--port", "0", "--host", "127.0.0.1"]
    with tempfile.TemporaryFile(mode="w+") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
        try:
            yield _wait_for_url(proc, log, timeout)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover - a server that ignores SIGTERM
                proc.kill()
                proc.wait()


def _wait_for_url(proc: subprocess.Popen, log: Any, timeout: float) -> str:
    import re

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log.seek(0)
        found = re.search(r"(http://[^\s]+:\d+/)", log.read())
        if found:
            return found.group(1)
        if proc.poll() is not None:
            log.seek(0)
            raise RuntimeError(_("tensorboard exited with code {code}: {log}").format(
                code=proc.returncode, log=log.read()[-500:]))
        time.sleep(0.1)
    raise TimeoutError(_("tensorboard printed no URL within {timeout:.0f} s").format(timeout=timeout))
