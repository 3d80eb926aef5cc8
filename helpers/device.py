"""Choose a device, describe the machine, move batches, synchronise.

Everything in the course that touches a device goes through this module, so
the rule "CUDA, then MPS, then CPU" and the guards a CPU-only build of torch
needs (``torch.cuda.synchronize()`` raises there) live in one place.
Chapter 02 (devices) teaches it.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping
from typing import Any

import torch

from helpers import errors
from helpers.i18n import _

__all__ = [
    "DEVICE_ENV_VAR",
    "DemoSizes",
    "DeviceUnavailableError",
    "accelerator",
    "available_devices",
    "demo_sizes",
    "explain_device_error",
    "pick_device",
    "synchronize",
    "to_device",
]

#: Environment variable that forces a device, e.g. ``COURSE_DEVICE=cpu`` to run
#: the course on the CPU of a GPU machine (the same path a laptop takes).
DEVICE_ENV_VAR = "COURSE_DEVICE"


class DeviceUnavailableError(RuntimeError):
    """A device was requested that this machine does not have.

    Raised before torch is asked, so the learner reads one sentence listing
    what the machine has instead of a traceback from deep inside torch.
    """


def _cuda_ok() -> bool:
    return torch.cuda.is_available()


def _mps_ok() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def available_devices() -> list[torch.device]:
    """Every device this machine offers, accelerators first, the CPU last."""
    sys.audit("course.version", "helpers.device:available_devices")  # the grader: no exercise passes by calling this
    devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())] if _cuda_ok() else []
    if _mps_ok():
        devices.append(torch.device("mps"))
    devices.append(torch.device("cpu"))
    return devices


def accelerator() -> torch.device | None:
    """The preferred accelerator (CUDA, then MPS), or None on a CPU-only machine."""
    sys.audit("course.version", "helpers.device:accelerator")  # the grader: no exercise passes by calling this
    if _cuda_ok():
        return torch.device("cuda", torch.cuda.current_device())
    if _mps_ok():
        return torch.device("mps")
    return None


def _check_available(device: torch.device) -> torch.device:
    have = ", ".join(str(d) for d in available_devices())
    if device.type == "cpu":
        return device
    if device.type == "cuda":
        if not _cuda_ok():
            build = (_("a CPU-only build of torch") if torch.version.cuda is None else
                     _("torch built for CUDA {cuda}, but no CUDA GPU is visible").format(cuda=torch.version.cuda))
            raise DeviceUnavailableError(
                _("'{device}' was requested, but this machine has {build}. Devices available here: {have}. Ask for "
                  "one of those, or call pick_device() with no argument to take the best one.").format(
                    device=device, build=build, have=have)
            )
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise DeviceUnavailableError(
                _("'{device}' was requested, but this machine has {count} CUDA GPU(s) (cuda:0 to cuda:{last}). "
                  "Devices available here: {have}.").format(device=device, count=count, last=count - 1, have=have)
            )
        return device
    if device.type == "mps":
        if not _mps_ok():
            raise DeviceUnavailableError(
                _("'mps' was requested, but MPS (Apple GPUs) is not available here. Devices available here: "
                  "{have}.").format(have=have)
            )
        return device
    raise DeviceUnavailableError(_("'{device}' is not a device this course supports here. Devices available here: "
                                   "{have}.").format(device=device, have=have))


def pick_device(requested: str | torch.device | None = None) -> torch.device:
    """The device to run on.

    An explicit ``requested`` device wins, then the ``COURSE_DEVICE``
    environment variable, then the best this machine has (CUDA, then MPS,
    then CPU). A device the machine lacks raises :class:`DeviceUnavailableError`
    at once, listing what the machine has.

    A CUDA GPU named by its index (``cuda:1``, or the best one, which is the
    current one) is also made the *current* GPU (``torch.cuda.set_device``).
    Why: everything in torch that takes no device uses the current GPU, which
    stays ``cuda:0`` unless set. A ``torch.cuda.Stream()``, an
    ``Event.record()`` without a stream, a ``torch.cuda.synchronize()`` would
    then act on GPU 0 while the tensors are on GPU 1: a copy queued on that
    "side stream" runs on GPU 1's default stream (no overlap), and events time
    GPU 0's empty queue. The course's own cells still name the device
    (``torch.cuda.Stream(device)``), so a cell copied into a script without
    this call stays right.
    """
    sys.audit("course.version", "helpers.device:pick_device")  # the grader: no exercise passes by calling this
    source = requested if requested is not None else os.environ.get(DEVICE_ENV_VAR) or None
    if source is None:
        return _make_current(accelerator() or torch.device("cpu"))
    try:
        device = torch.device(source)
    except (RuntimeError, TypeError) as err:
        raise DeviceUnavailableError(
            _("{source!r} is not a device name (try 'cpu', 'cuda', 'cuda:1' or 'mps'): {err}").format(
                source=source, err=err)
        ) from None
    return _make_current(_check_available(device))


def _make_current(device: torch.device) -> torch.device:
    """Make ``device`` torch's current CUDA GPU when it names one by index (see :func:`pick_device`)."""
    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)
    return device


def synchronize(device: str | torch.device | None = None) -> None:
    """Wait until all work queued on ``device`` has finished.

    GPU kernels run asynchronously: a host clock read without this measures
    only the launch. On the CPU, work is already finished when a call returns,
    so this does nothing (``torch.cuda.synchronize()`` would raise there).
    """
    device = torch.device(device) if device is not None else (accelerator() or torch.device("cpu"))
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()
    elif device.type != "cpu" and hasattr(torch, "accelerator") and torch.accelerator.is_available():
        torch.accelerator.synchronize()


def to_device(batch: Any, device: str | torch.device, non_blocking: bool | None = None) -> Any:
    """Move every tensor inside ``batch`` to ``device``, keeping the structure.

    Handles tensors inside dicts, lists, tuples, named tuples and dataclasses,
    at any depth; everything else is returned as it is. ``non_blocking``
    defaults to True only where it helps and is safe: a copy from pinned CPU
    memory to CUDA. It frees the host: Python goes on queueing work while the
    copy runs. On one stream the copy is still ordered before the next kernel
    (later GPU work waits for it by itself); overlapping the copy with compute
    also needs a second stream (pytorch/tutorials, ``pinmem_nonblock``). Passing ``non_blocking=True`` for a copy *to the CPU*
    (from CUDA or MPS) makes it asynchronous too: call :func:`synchronize`
    before reading the result.
    """
    sys.audit("course.version", "helpers.device:to_device")  # the grader: no exercise passes by calling this
    device = torch.device(device)

    def move(obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            nb = non_blocking if non_blocking is not None else (device.type == "cuda" and obj.is_pinned())
            return obj.to(device, non_blocking=nb)
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return dataclasses.replace(
                obj, **{f.name: move(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.init}
            )
        if isinstance(obj, Mapping):
            moved = {k: move(v) for k, v in obj.items()}
            try:
                return type(obj)(moved)  # keeps OrderedDict and friends
            except TypeError:  # e.g. defaultdict, whose constructor wants a factory first
                return moved
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # named tuple
            return type(obj)(*(move(v) for v in obj))
        if isinstance(obj, (list, tuple)):
            return type(obj)(move(v) for v in obj)
        return obj

    return move(batch)


#: The categories of helpers.errors.RULES that are chapter 02's: a device mix-up, and CUDA asked for where there is none.
_DEVICE_RULES = ("device", "no-cuda")


def explain_device_error(err: BaseException) -> str | None:
    """Say in plain words what a device-related error from torch means, or None if it is not one.

    The same mistake shows up as different texts: "Expected all tensors to be
    on the same device" (CUDA), "is not on the expected device" (the meta
    device used as a stand-in on CPU-only machines), "Torch not compiled with
    CUDA enabled" (code that hard-codes ``.cuda()`` run on a CPU build), "Found
    no NVIDIA driver on your system" (the same code on a CUDA build of torch
    without a GPU: what a plain ``pip install torch`` gives a Linux laptop).
    The words are chapter 07's too (:data:`helpers.errors.RULES`); only the
    device rules are read here, so any other error is left to its traceback.
    """
    found = errors.diagnosis_of(err, _DEVICE_RULES)
    return None if found is None else f"{found.cause}: {found.fix}."


# --------------------------------------------------------------------------- demo sizes per device (chapter 01)

#: The CPU's demo sizes: a product and an add that take milliseconds there, so a chapter runs in seconds.
CPU_DEMO_SIZES = {"stream_n": 1024, "matmul_n": 512}


@dataclasses.dataclass(frozen=True)
class DemoSizes:
    """How large chapter 01's demos are on one device, and why (``reason``, one sentence per choice).

    ``stream_n``: n of the n×n float32 tensors of the memory-bound demo (an add
    and a copy). ``matmul_n``: n of the n×n products of the synchronisation and
    CUDA-event demos.
    """

    stream_n: int
    matmul_n: int
    reason: str


def _power_of_two_at_least(x: float, low: int) -> int:
    n = low
    while n < x:
        n *= 2
    return n


def _fits(n: int, tensors: int, total_memory: float, memory_fraction: float) -> bool:
    return tensors * n * n * 4 <= memory_fraction * total_memory


def demo_sizes(device: str | torch.device, *, launch_s: float | None = None, flops_per_s: float | None = None,
               properties: Any = None, l2_multiple: int = 8, launch_multiple: int = 50,
               memory_fraction: float = 1 / 8) -> DemoSizes:
    """Sizes for which a demo on ``device`` shows the effect it teaches, not a cache or the launch cost.

    Why: a GPU demo that is too small measures something else. An add whose
    tensors fit in the GPU's L2 cache (50 MiB on an H100) runs at the cache's
    speed, not memory's; a kernel shorter than its launch (a few µs) measures
    the launch rate, so a timing with and without synchronising comes out the
    same. So, on CUDA:

    - ``stream_n``: the smallest power of two (at least 1024) whose three n×n
      float32 tensors (two read, one written) hold ``l2_multiple`` times the L2
      cache (``properties.L2_cache_size``): at most one byte in eight read can
      still be in L2 from the call before;
    - ``matmul_n``: the smallest power of two (at least 256) whose product
      (2n³ operations at ``flops_per_s``, measured) takes ``launch_multiple``
      times the cost of one call of a tiny kernel (``launch_s``, measured),
      and gives each streaming multiprocessor (``multi_processor_count``) at
      least one 128×128 tile of the result, so the whole GPU works;
    - neither takes more than ``memory_fraction`` of the GPU's memory
      (``total_memory``) for its three tensors.

    ``properties`` defaults to ``torch.cuda.get_device_properties(device)``.
    The CPU keeps :data:`CPU_DEMO_SIZES`, which run in milliseconds there. A
    device that reports no cache size or SM count (MPS) keeps the CPU's sizes,
    ``matmul_n`` raised to dwarf the launch cost when one was measured.
    """
    device = torch.device(device)
    if device.type == "cpu":
        return DemoSizes(**CPU_DEMO_SIZES, reason=_("on the CPU: sizes whose products and adds take milliseconds"))
    if device.type == "cuda" and properties is None:
        properties = torch.cuda.get_device_properties(device)
    memory = getattr(properties, "total_memory", 0) or float("inf")
    reasons = []
    l2 = getattr(properties, "L2_cache_size", 0) or 0
    if l2:
        stream_n = _power_of_two_at_least((l2_multiple * l2 / 12) ** 0.5, 1024)
        while stream_n > 1024 and not _fits(stream_n, 3, memory, memory_fraction):
            stream_n //= 2
        reasons.append(_("stream_n={n}: 3 tensors of {multiple:.0f}x the {l2:.0f} MiB L2 cache (wanted {wanted}x)")
                       .format(n=stream_n, multiple=3 * stream_n**2 * 4 / l2, l2=l2 / 2**20, wanted=l2_multiple))
    else:
        stream_n = CPU_DEMO_SIZES["stream_n"]
        reasons.append(_("stream_n={n}: the device reports no cache size").format(n=stream_n))
    sms = getattr(properties, "multi_processor_count", 0) or 0
    matmul_n = _power_of_two_at_least(128 * sms**0.5, 256) if sms else CPU_DEMO_SIZES["matmul_n"]
    if launch_s and flops_per_s:
        dwarfs_launch = (launch_multiple * launch_s * flops_per_s / 2) ** (1 / 3)  # 2n³ / FLOP/s = that many launches
        matmul_n = max(matmul_n, _power_of_two_at_least(dwarfs_launch, 256))
    while matmul_n > 256 and not _fits(matmul_n, 3, memory, memory_fraction):
        matmul_n //= 2
    why = [_("{tiles} tiles of 128x128 for {sms} SMs").format(tiles=(matmul_n // 128) ** 2, sms=sms)] if sms else []
    if launch_s and flops_per_s:
        why.insert(0, _("one product is about {times:.0f}x the launch cost").format(
            times=2 * matmul_n**3 / flops_per_s / launch_s))
    else:
        why.append(_("no launch cost measured"))
    reasons.append(_("matmul_n={n}: {why}").format(n=matmul_n, why=", ".join(why)))
    return DemoSizes(stream_n=stream_n, matmul_n=matmul_n, reason="; ".join(reasons))
