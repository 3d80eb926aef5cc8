"""A timing model for the fake CUDA machine: GPU-like time on a machine without a GPU (issue 44).

Why: on :mod:`support.fake_cuda`'s machine a kernel, a launch and a synchronize cost nothing, so every mistake
about *time* on a GPU was invisible there: a clock whose synchronize costs microseconds (review 3, W1: the
course's timer measured one block on a GPU, so no spread and no conclusion), launch-bound small calls, a
blocking copy from pageable memory, an event read before its work ran. With a :class:`Profile` the machine
keeps a :class:`Timeline`:

* every operator on a CUDA tensor costs the host one launch (:attr:`Profile.launch_s`) and is queued on its
  GPU, where it takes device time by a roofline: its FLOPs over the peak for its dtype, or its bytes over the
  memory bandwidth, whichever is longer, and never less than :attr:`Profile.kernel_floor_s`;
* a synchronize, a read of a value on the GPU (``.item()``, ``float(t)``, ``.cpu()``) and a copy from pageable
  memory make the host wait for the queue; a copy from pinned memory with ``non_blocking=True`` is queued;
* ``torch.cuda.Event.record`` reads the device's clock where the queue has got to, rounded to the event
  resolution;
* the host's clocks (``time.perf_counter``, ``timeit.default_timer``, ``time.monotonic``) read *virtual* time:
  the main thread's CPU time (so a machine busy with other programs slows nothing down), minus what the fake
  tensors' own bookkeeping cost (a real GPU machine does not pay it), plus the launches, the waits, the
  modelled CPU work and what ``time.sleep`` was asked for.

Operators on CPU tensors are fake too on this machine (they have no values), so they cost what this
machine's CPU would take: :class:`HostProfile` is *measured* once per process, on real tensors, before the
simulation starts (a matrix product's FLOP/s, a copy's bytes/s, the cheapest call). So a CPU-against-GPU
comparison sets this machine's measured CPU against a modelled GPU, never against typed-in CPU numbers.

What the model cannot say (cuDNN's choice of algorithm, clocks and power, L2 effects, overlap between
streams and copy engines, compilation) is listed in ``docs/STACK_NOTES.md``, "The simulated GPU".
"""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
import time
import timeit
from typing import Any

import torch
from torch.utils._pytree import tree_leaves

__all__ = ["H100_SXM", "PROFILES", "T4", "HostProfile", "Profile", "Timeline", "measure_host"]

_real_clock = time.perf_counter  # the real clock, read before any simulation patches time.perf_counter
#: What the virtual host clock counts: the main thread's CPU time. Not the wall clock, so that a machine busy
#: with other programs (a grader, CI with every core taken) slows nothing that the simulated machine reports:
#: time the process spends descheduled is no time its host spent working (``time.sleep`` is added by hand).
_host_clock = time.thread_time
_real_sleep = time.sleep

TB, GB = 1e12, 1e9


@dataclasses.dataclass(frozen=True)
class Figure:
    """One number of a profile and where it comes from: a datasheet, a published measurement, or an estimate."""

    value: float
    source: str


@dataclasses.dataclass(frozen=True)
class Profile:
    """What one GPU model does per second, and what its host pays per launch and synchronize."""

    name: str
    fp32: Figure  #: FLOP/s of float32 work without tensor cores (and of float32 matmuls when TF32 is off)
    tf32: Figure | None  #: FLOP/s of float32 matmuls on tensor cores when TF32 is allowed (None: no TF32)
    bf16: Figure  #: FLOP/s of bfloat16 matmuls (emulated at fp32's rate where there is no native bf16)
    fp16: Figure  #: FLOP/s of float16 matmuls on tensor cores
    memory_bandwidth: Figure  #: bytes/s to and from the GPU's memory
    pinned_copy: Figure  #: bytes/s of a host<->device copy from or to pinned (page-locked) memory
    pageable_copy: Figure  #: bytes/s of a copy from or to ordinary (pageable) memory, staged by the driver
    launch_s: Figure  #: host seconds one eager operator costs to launch (torch's dispatcher and the CUDA launch)
    kernel_floor_s: Figure  #: device seconds of the shortest kernel
    sync_s: Figure  #: host seconds a synchronize costs on top of waiting for the queue
    event_resolution_s: Figure  #: the resolution of an event's timestamp

    def matmul_rate(self, dtype: torch.dtype, tf32_allowed: bool) -> float:
        """The peak FLOP/s a matrix product (or a convolution) of ``dtype`` runs at."""
        if dtype == torch.bfloat16:
            return self.bf16.value
        if dtype == torch.float16:
            return self.fp16.value
        if dtype == torch.float32 and tf32_allowed and self.tf32 is not None:
            return self.tf32.value
        return self.fp32.value


_H100_SHEET = "NVIDIA H100 Tensor Core GPU datasheet (2023), H100 SXM column"
_T4_SHEET = "NVIDIA T4 Tensor Core GPU datasheet (2019)"
_LAUNCH = ("estimate: cudaLaunchKernel's 2-4 us on the host (NVIDIA, 'Getting Started with CUDA Graphs', 2019) plus "
           "torch's eager dispatcher, about 1-2 us")
_FLOOR = "estimate: the shortest kernels in an Nsight Systems timeline last about 2 us"
_SYNC = ("torch.utils.benchmark.Timer's docstring: a synchronize costs 'order single to low double digit "
         "microseconds'; 5 us is the issue's probe")
_EVENT = "CUDA Runtime API, cudaEventElapsedTime: 'resolution of around 0.5 microseconds'"
_PINNED = "estimate: 80% of the link's rate per direction, what pinned copies reach on PCIe"
_PAGEABLE = ("estimate: half the pinned rate (the driver copies pageable memory through a pinned staging buffer "
             "first: CUDA C++ Best Practices Guide, 'Pinned Memory')")

#: An H100 SXM5 80 GB. Tensor-core figures are the datasheet's dense ones (half its "with sparsity" figures).
H100_SXM = Profile(
    name="H100 SXM (simulated)",
    fp32=Figure(67 * TB, f"{_H100_SHEET}: FP32 67 TFLOPS"),
    tf32=Figure(494.5 * TB, f"{_H100_SHEET}: TF32 Tensor Core 989 TFLOPS with sparsity, so 494.5 dense"),
    bf16=Figure(989.5 * TB, f"{_H100_SHEET}: BF16 Tensor Core 1,979 TFLOPS with sparsity, so 989.5 dense"),
    fp16=Figure(989.5 * TB, f"{_H100_SHEET}: FP16 Tensor Core 1,979 TFLOPS with sparsity, so 989.5 dense"),
    memory_bandwidth=Figure(3.35 * TB, f"{_H100_SHEET}: GPU memory bandwidth 3.35 TB/s"),
    pinned_copy=Figure(0.8 * 64 * GB, f"{_PINNED}; {_H100_SHEET}: PCIe Gen5 128 GB/s both ways, 64 GB/s each"),
    pageable_copy=Figure(0.4 * 64 * GB, _PAGEABLE),
    launch_s=Figure(5e-6, _LAUNCH),
    kernel_floor_s=Figure(2e-6, _FLOOR),
    sync_s=Figure(5e-6, _SYNC),
    event_resolution_s=Figure(0.5e-6, _EVENT),
)

#: A T4 (Colab's free GPU): Turing, no TF32 and no native bf16 (torch emulates it at roughly fp32's rate).
T4 = Profile(
    name="T4 (simulated)",
    fp32=Figure(8.1 * TB, f"{_T4_SHEET}: single-precision 8.1 TFLOPS"),
    tf32=None,
    bf16=Figure(8.1 * TB, "no native bf16 on Turing (compute capability 7.5): emulated, taken at fp32's 8.1 TFLOPS"),
    fp16=Figure(65 * TB, f"{_T4_SHEET}: mixed precision (FP16/FP32) 65 TFLOPS"),
    memory_bandwidth=Figure(320 * GB, f"{_T4_SHEET}: GPU memory bandwidth 320+ GB/s"),
    pinned_copy=Figure(0.8 * 16 * GB, f"{_PINNED}; {_T4_SHEET}: PCIe Gen3 x16, 16 GB/s each way"),
    pageable_copy=Figure(0.4 * 16 * GB, _PAGEABLE),
    launch_s=Figure(5e-6, _LAUNCH),
    kernel_floor_s=Figure(2e-6, _FLOOR),
    sync_s=Figure(5e-6, _SYNC),
    event_resolution_s=Figure(0.5e-6, _EVENT),
)

PROFILES = {"H100": H100_SXM, "T4": T4}


@dataclasses.dataclass(frozen=True)
class HostProfile:
    """This machine's CPU, measured on real tensors: what a fake CPU operator costs the host."""

    flops_per_s: float  #: a float32 matrix product's FLOP/s with torch's threads
    bytes_per_s: float  #: a large copy's bytes/s (read and written)
    call_s: float  #: the cheapest operator's cost (adding 1 to one number): torch's per-call overhead

    def seconds(self, flops: float, nbytes: float) -> float:
        return max(self.call_s, flops / self.flops_per_s, nbytes / self.bytes_per_s)


@functools.cache
def measure_host() -> HostProfile:
    """Measure this machine's CPU once per process, on real tensors, before any fake machine starts.

    The best of a few short repeats each: the model's CPU is this CPU at its quietest moment, so a
    CPU-against-GPU conclusion is never the fault of a loaded test machine.
    """
    def best(fn, repeats: int = 7, number: int = 5) -> float:
        fn()
        times = []
        for _ in range(repeats):
            start = _real_clock()
            for _ in range(number):
                fn()
            times.append((_real_clock() - start) / number)
        return min(times)

    n = 256
    a, b = torch.randn(n, n), torch.randn(n, n)
    big = 4 * 2**20  # floats: 16 MiB, beyond most caches
    x, y = torch.empty(big), torch.empty(big)
    tiny = torch.zeros(1)
    return HostProfile(flops_per_s=2 * n**3 / best(lambda: a @ b), bytes_per_s=2 * 4 * big / best(lambda: y.copy_(x)),
                       call_s=best(lambda: tiny.add_(1), number=200))


# --------------------------------------------------------------------------- the operators' costs

_NO_KERNEL = {"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::detach", "aten::alias",
              "aten::lift_fresh", "aten::_local_scalar_dense", "aten::set_", "aten::resize_", "aten::_unsafe_view"}
_COPIES = {"aten::_to_copy", "aten::copy_", "aten::to"}


def _tensors(tree: Any) -> list[torch.Tensor]:
    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


def _nbytes(tensors: list[torch.Tensor]) -> int:
    seen, total = set(), 0
    for t in tensors:
        if id(t) not in seen:
            seen.add(id(t))
            total += t.numel() * t.element_size()
    return total


def _flops(func: Any, args: tuple, kwargs: dict, out: Any) -> float:
    """FLOPs of one operator: torch's own count (``torch.utils.flop_counter``) for products, convolutions and
    attention; one per output element for the rest (element-wise work, whose time is its bytes anyway)."""
    from torch.utils.flop_counter import flop_registry

    count = flop_registry.get(func.overloadpacket)
    if count is not None:
        try:
            return float(count(*args, **kwargs, out_val=out))
        except Exception:  # noqa: BLE001 - an overload torch's formula does not take: fall back to elements
            pass
    return float(sum(t.numel() for t in _tensors(out)))


def _reads_and_writes(func: Any, args: tuple, kwargs: dict, out: Any) -> int:
    """Bytes an operator reads and writes: its tensor inputs (not ``out=``, nor the target of a copy) and outputs."""
    reads = _tensors([a for i, a in enumerate(args) if not (i == 0 and func.name() == "aten::copy_")]) + \
        _tensors({k: v for k, v in kwargs.items() if k != "out"})
    return _nbytes(reads) + _nbytes(_tensors(out))


def _cuda_index(tensors: list[torch.Tensor]) -> int | None:
    for t in tensors:
        if t.device.type == "cuda":
            return t.device.index or 0
    return None


class Timeline:
    """The host's virtual clock and each GPU's queue, on one :class:`Profile` (see the module text).

    Times are virtual host seconds, as :meth:`now` reads them. ``queue_end[i]`` is when GPU ``i`` will have
    finished what is queued on it; ``busy[i]`` the device seconds it has spent working.
    """

    def __init__(self, profile: Profile, count: int = 1, host: HostProfile | None = None) -> None:
        self.profile, self.host = profile, host or measure_host()
        self.offset = 0.0  # virtual seconds minus the host clock's
        self.queue_end, self.busy = [0.0] * count, [0.0] * count
        self.launches = 0
        #: simulated host seconds charged so far (launches, synchronize, waits, sleeps): the model's own part of a
        #: host time, which no real Python cost blurs (gpu_sim's model check reads it)
        self.charged = 0.0
        self.inside = False  #: True while the fake machine's own code runs (:meth:`enter`)
        self._entered = self._last = self._gap = 0.0
        self._left = _host_clock()
        self.taken = 0.0  #: real seconds taken back so far
        self.leftover = 0.0  #: real seconds a fake operator costs before :meth:`enter` (:meth:`calibrate`)
        self._since_step = (list(self.busy), 0)  # device seconds and launches since the last optimizer step

    # ---------------------------------------------------------------- the clocks
    def now(self) -> float:
        """Virtual host seconds: the main thread's CPU time (:data:`_host_clock`) plus the offset, held still while
        :attr:`inside`.

        Never less than a reading before it (taking back :attr:`leftover` could otherwise step it back a little).
        """
        t = (self._entered if self.inside else _host_clock()) + self.offset
        if t < self._last:  # the offset absorbs the difference, so a wait added next moves the clock by itself
            self.offset += self._last - t
            return self._last
        self._last = t
        return t

    def free(self) -> bool:
        """Whether the fake machine's code about to run should be taken off the clock: not already inside it,
        and on the main thread (a helper thread's real time runs beside the main thread's, not in it)."""
        return not self.inside and threading.current_thread() is threading.main_thread()

    def enter(self) -> None:
        """The fake machine's own code starts: the real clock is held still until :meth:`leave`.

        What the modelled machine does meanwhile (a launch, a wait) still moves the virtual clock, so a kernel
        queued here starts when the host really got to it, not after the fake tensors' bookkeeping.
        """
        self.inside, self._entered = True, _host_clock()
        self._gap = self._entered - self._left  # real seconds since the fake machine's code last ran

    def leave(self, operator: bool = False) -> None:
        """The fake machine's own code is done: its real time is taken back (no GPU machine spends it), and for an
        operator also :attr:`leftover`, what reaching the fake mode cost before :meth:`enter`."""
        self._left = _host_clock()
        spent = self._left - self._entered
        self.taken += spent
        # never more than passed since the last operator: the clock never runs backwards, nor stands still
        self.offset -= spent + (min(self.leftover, self._gap) if operator else 0.0)
        self.inside = False

    def calibrate(self, call: Any, rounds: int = 5, calls: int = 200) -> None:
        """Measure :attr:`leftover`: the real seconds one fake operator costs outside :meth:`enter`/:meth:`leave`
        (torch's C++ calling into Python, Dynamo's wrapper around the mode), beyond an empty Python call.

        ``call()`` runs one operator on the fake machine. The least of ``rounds`` averages, so a moment of load
        never makes the simulated host faster than the real one would be; afterwards the counters start again.
        """
        def per_call(fn: Any) -> float:
            best = math.inf
            for _ in range(rounds):
                taken, start = self.taken, _host_clock()
                for _ in range(calls):
                    fn()
                best = min(best, (_host_clock() - start - (self.taken - taken)) / calls)
            return best

        self.leftover = max(0.0, per_call(call) - per_call(lambda: None))
        self.queue_end, self.busy = [max(self.queue_end)] * len(self.queue_end), [0.0] * len(self.busy)
        self.launches = 0
        self._since_step = (list(self.busy), 0)

    def now_ns(self) -> int:
        return int(self.now() * 1e9)

    def clocks(self) -> list[tuple[Any, str, Any]]:
        """(owner, attribute, replacement) for every host clock a program reads, and ``time.sleep``, for
        ``helpers.checks.patching``."""
        return [(time, "perf_counter", self.now), (time, "monotonic", self.now), (timeit, "default_timer", self.now),
                (time, "perf_counter_ns", self.now_ns), (time, "monotonic_ns", self.now_ns), (time, "sleep", self.sleep)]

    def sleep(self, seconds: float) -> None:
        """``time.sleep``: it really sleeps (a loop may poll another thread), and on the main thread the virtual
        clock moves by ``seconds``, which its CPU time does not count (a dataset's modelled per-item cost)."""
        _real_sleep(seconds)
        if threading.current_thread() is threading.main_thread() and seconds > 0:
            self._host(seconds)

    def _host(self, seconds: float) -> None:
        self.offset += seconds
        self.charged += seconds

    # ---------------------------------------------------------------- the device
    def wait_for(self, index: int) -> None:
        """The host waits until GPU ``index`` has finished its queue (a synchronize, a value read back)."""
        self._host(self.profile.sync_s.value)
        late = self.queue_end[index] - self.now()
        if late > 0:
            self._host(late)

    def wait_until(self, at: float) -> None:
        """The host waits until virtual time ``at`` (an event's synchronize)."""
        late = at - self.now()
        if late > 0:
            self._host(late)

    def record(self, index: int) -> float:
        """An event's timestamp: when GPU ``index`` reaches this point of its queue, at the event's resolution."""
        at = max(self.queue_end[index], self.now())
        step = self.profile.event_resolution_s.value
        return math.floor(at / step) * step

    def done(self, index: int, at: float) -> bool:
        """Whether the host's now is at or past ``at`` (a nanosecond's grace for the sums' rounding)."""
        return self.now() >= at - 1e-9

    def _queue(self, index: int, seconds: float) -> None:
        start = max(self.queue_end[index], self.now())
        self.queue_end[index] = start + seconds
        self.busy[index] += seconds

    def _kernel(self, index: int, seconds: float) -> None:
        self.launches += 1
        self._host(self.profile.launch_s.value)
        self._queue(index, max(self.profile.kernel_floor_s.value, seconds))

    # ---------------------------------------------------------------- one operator
    def operator(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        """What one operator costs on the modelled machine (called between :meth:`enter` and :meth:`leave`)."""
        inputs, outputs = _tensors((args, kwargs)), _tensors(out)
        name = func.name()
        index_in, index_out = _cuda_index(inputs), _cuda_index(outputs)
        if name in _COPIES and inputs and outputs and (index_in is None) != (index_out is None):
            self._copy(inputs, outputs, kwargs, to_device=index_out is not None,
                       index=index_out if index_out is not None else index_in)
            return
        index = index_out if index_out is not None else index_in
        if func.namespace in ("prim", "profiler"):
            return  # a question about a tensor (its device), a profiler's mark: no work
        if name in _NO_KERNEL or getattr(func, "is_view", False):
            self._host(self.host.call_s)  # bookkeeping only, on either device
            return
        flops, nbytes = _flops(func, args, kwargs, out), _reads_and_writes(func, args, kwargs, out)
        if index is None:
            self._host(self.host.seconds(flops, nbytes))  # CPU work: synchronous, at this machine's measured rates
            return
        dtype = outputs[0].dtype if outputs else inputs[0].dtype
        matmul = func.overloadpacket in _matmul_ops()
        rate = (self.profile.matmul_rate(dtype, _tf32_allowed(func)) if matmul else self.profile.fp32.value)
        self._kernel(index, max(flops / rate, nbytes / self.profile.memory_bandwidth.value))

    def _copy(self, inputs: list[torch.Tensor], outputs: list[torch.Tensor], kwargs: dict, to_device: bool,
              index: int) -> None:
        """A copy between the host and GPU ``index``: queued when pinned and non-blocking, else the host waits."""
        source = next((t for t in inputs if (t.device.type == "cuda") != to_device), inputs[0])
        nbytes = source.numel() * source.element_size()
        pinned = bool(getattr(source if to_device else outputs[0], "_fake_cuda_pinned", False))
        rate = (self.profile.pinned_copy if pinned else self.profile.pageable_copy).value
        if to_device and pinned and kwargs.get("non_blocking", False):
            self._kernel(index, nbytes / rate)
            return
        # from pageable memory the driver first waits for the queue (CUDA's "API synchronization behavior"),
        # and a copy to the host is read by the host: either way the host waits, then the copy runs
        self.launches += 1
        self._host(self.profile.launch_s.value)
        self.wait_for(index)
        self._queue(index, nbytes / rate)
        self.wait_until(self.queue_end[index])

    def optimizer_stepped(self, *args: Any) -> None:
        """An optimizer step ended (a global post-hook): what comes next, up to a backward, is the forward pass."""
        self._since_step = (list(self.busy), self.launches)

    def backward(self, index: int) -> None:
        """A backward pass, which the fake machine cannot run (its stand-in only fills zero gradients): it costs
        twice the forward's device work since the last optimizer step (the rule of thumb of two products per
        product, Kaplan et al. 2020), and the host waits while autograd's thread launches twice the forward's
        kernels, as ``loss.backward()`` does."""
        busy, launches = self._since_step
        forward_s, forward_launches = self.busy[index] - busy[index], self.launches - launches
        self.launches += 2 * forward_launches
        self._host(2 * forward_launches * self.profile.launch_s.value)
        self._queue(index, 2 * forward_s)
        self._since_step = (list(self.busy), self.launches)


@functools.cache
def _matmul_ops() -> frozenset:
    from torch.utils.flop_counter import flop_registry

    return frozenset(flop_registry)


def _tf32_allowed(func: Any) -> bool:
    """Whether a float32 product or convolution may use TF32 tensor cores, by torch's own switches."""
    if "conv" in func.name():
        return bool(torch.backends.cudnn.allow_tf32)
    return bool(torch.backends.cuda.matmul.allow_tf32) or torch.get_float32_matmul_precision() != "highest"
