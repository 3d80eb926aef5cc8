"""A simulated GPU on a virtual clock, to grade a timer's logic on a CPU-only grader (chapter 01's timer).

:class:`SimulatedDevice` is a device whose kernels cost the host only a
launch and run on a queue that finishes only when it is synchronised; its
:class:`SimulatedEvent` s and its one :class:`SimulatedStream` sit on the
same queue and clock. While active it is a
:class:`~helpers.checks.fakes.machine.FakeMachine` with one GPU (or none),
every public clock (:data:`CLOCKS`) reads the virtual clock and every public
way to synchronise (:func:`sync_routes`) waits for the virtual queue. It
records what the timer did (``log``, ``readings``); what that record means
is judged by :mod:`helpers.checks.ch01`.
"""

from __future__ import annotations

import contextlib
import threading
import time
import timeit
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch

from helpers import benchmark
from helpers import device as course_device
from helpers.checks.fakes.machine import FakeMachine
from helpers.checks.patching import Change
from helpers.record import Record

__all__ = [
    "CLOCKS",
    "NOT_COMPLETED",
    "NOT_RECORDED",
    "NOT_TIMED",
    "NO_EVENTS",
    "SimulatedDevice",
    "SimulatedEvent",
    "SimulatedStream",
    "kind_of",
    "sync_routes",
]

# Every public clock a learner's timer may read: name -> (owner, attribute, scale from seconds).
CLOCKS: dict[str, tuple[Any, str, float]] = {
    "perf_counter": (time, "perf_counter", 1.0),
    "perf_counter_ns": (time, "perf_counter_ns", 1e9),
    "monotonic": (time, "monotonic", 1.0),
    "monotonic_ns": (time, "monotonic_ns", 1e9),
    "time": (time, "time", 1.0),
    "time_ns": (time, "time_ns", 1e9),
    "default_timer": (timeit, "default_timer", 1.0),
}


def sync_routes() -> list[tuple[Any, str]]:
    """Every public way to synchronise: torch's three and the course's two (the same function)."""
    return [(torch.cuda, "synchronize"), (torch.mps, "synchronize"), (torch.accelerator, "synchronize"),
            (course_device, "synchronize"), (benchmark, "synchronize")]


# torch's own errors, word for word: a simulated event raises them where torch would
NOT_TIMED = "Both events must be created with argument 'enable_timing=True'."  # torch's ValueError, word for word
NOT_RECORDED = "Both events must be recorded before calculating elapsed time."
NOT_COMPLETED = "Both events must be completed before calculating elapsed time."
NO_EVENTS = "Tried to instantiate dummy base class Event"  # torch.cuda.Event() on a CPU-only build of torch


def kind_of(device: Any) -> str:
    """The type of ``device`` (a torch.device or a name), or its repr when it names no device."""
    try:
        return torch.device(device).type
    except (TypeError, RuntimeError):
        return repr(device)


class SimulatedEvent:
    """``torch.cuda.Event`` on a :class:`SimulatedDevice`: a mark in the device's queue, on its virtual clock.

    ``record()`` puts the mark behind the work queued so far: it is reached
    when that work is done (``free_at``), or at once on an idle device.
    ``synchronize()`` makes the host wait (in virtual time) until the mark is
    reached; ``query()`` says whether it is, each poll costing the host one
    launch's time; ``elapsed_time(end)`` is the milliseconds between two
    reached marks. As in torch, ``elapsed_time`` raises ValueError without
    ``enable_timing=True`` or a record, and RuntimeError while a mark is not
    reached yet; each misuse is logged as ``("elapsed", mistake)`` (a key of
    :data:`helpers.checks.ch01.EVENT_MISTAKES`, or ``"ok"``), so the checks can name it.
    """

    def __init__(self, sim: "SimulatedDevice", enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False, external: bool = False) -> None:
        self.sim = sim
        self.enable_timing = bool(enable_timing)
        self.at: float | None = None  # virtual time at which the device reaches this mark

    def record(self, stream: Any = None) -> None:
        self.sim.log.append(("record", self.sim.busy))
        self.at = max(self.sim.free_at, self.sim.now)

    def query(self) -> bool:
        if self.at is None:
            return True  # as CUDA: an event never recorded has nothing to wait for
        done = self.sim.now >= self.at - 1e-15
        if not done:
            self.sim.now = min(self.at, self.sim.now + self.sim.launch_s)  # a poll takes a little host time
        return done

    def synchronize(self) -> None:
        if self.at is not None:
            self.sim.log.append(("sync", self.sim.now < self.at - 1e-15))
            self.sim.now = max(self.sim.now, self.at)

    def wait(self, stream: Any = None) -> None:
        """Make a stream wait for this event: one stream here, so nothing to do."""

    def elapsed_time(self, end: "SimulatedEvent") -> float:
        mistake = ("untimed" if not (self.enable_timing and getattr(end, "enable_timing", False)) else
                   "unrecorded" if self.at is None or getattr(end, "at", None) is None else
                   "pending" if max(self.at, end.at) > self.sim.now + 1e-15 else "ok")
        self.sim.log.append(("elapsed", mistake))
        if mistake == "untimed":
            raise ValueError(NOT_TIMED)
        if mistake == "unrecorded":
            raise ValueError(NOT_RECORDED)
        if mistake == "pending":
            raise RuntimeError(NOT_COMPLETED)
        return (end.at - self.at) * 1e3

    def __repr__(self) -> str:
        return f"SimulatedEvent(enable_timing={self.enable_timing}, at={self.at})"


class SimulatedStream:
    """``torch.cuda.current_stream()`` on a :class:`SimulatedDevice`: its one queue of work.

    ``synchronize()`` waits for everything queued (as the device's own
    synchronize does); ``record_event`` records an event on it; ``query()``
    polls like :meth:`SimulatedEvent.query`. One stream, so waits between
    streams have nothing to do.
    """

    def __init__(self, sim: "SimulatedDevice") -> None:
        self.sim = sim

    def synchronize(self) -> None:
        self.sim.synchronize()

    def query(self) -> bool:
        done = not self.sim.busy
        if not done:
            self.sim.now = min(self.sim.free_at, self.sim.now + self.sim.launch_s)
        return done

    def record_event(self, event: SimulatedEvent | None = None) -> SimulatedEvent:
        event = event if event is not None else self.sim.event()
        event.record(self)
        return event

    def wait_event(self, event: Any) -> None:
        """Make this stream wait for an event: one stream here, so nothing to do."""

    def wait_stream(self, stream: Any) -> None:
        """Make this stream wait for another: one stream here, so nothing to do."""



class SimulatedDevice:
    """A stand-in device with a virtual clock, to check a timer's logic on a CPU-only grader.

    ``kind="cuda"`` behaves like a GPU: calling a kernel made by :meth:`kernel`
    costs the host only ``launch_s`` of (virtual) time, and the kernel runs on
    the device's queue; the host waits for it only when it synchronises.
    ``kind="cpu"`` is synchronous: a call returns when its work is done.

    While :meth:`active`, in the thread that entered it, the machine is a
    :class:`~helpers.checks.fakes.machine.FakeMachine` with one GPU (``kind="cuda"``)
    or none (``kind="cpu"``), the clocks in :data:`CLOCKS` read the virtual
    clock (so results do not depend on how fast the grader is), and every route
    in :func:`sync_routes` waits for the virtual queue (any arguments accepted),
    ``torch.cuda.Event`` (``torch.Event`` for this device) makes a
    :class:`SimulatedEvent` on the same queue and clock, and
    ``torch.cuda.current_stream()`` is that queue (:class:`SimulatedStream`).
    ``log`` records, in order, ``("call", i)``, ``("sync", busy)``,
    ``("clock", busy)``, ``("record", busy)`` and ``("elapsed", mistake)``, where
    ``busy`` says whether queued work was unfinished then (for an event's
    ``synchronize``, whether its mark was not reached yet).
    """

    def __init__(self, kind: str = "cuda", *, launch_s: float = 5e-6, start: float = 1000.0) -> None:
        self.device = torch.device(kind)
        self.asynchronous = self.device.type != "cpu"
        self.launch_s = launch_s
        self.now = start  # host time, virtual seconds
        self.free_at = start  # when the device finishes its queued work
        self.calls = 0
        self.log = Record()  # the grader keeps a copy: a log the learner's code rewrote is found (trusted_log)
        self.readings = Record()  # the virtual time each clock read returned: what a measured result comes from
        self._owner: int | None = None
        self._event_class: type[SimulatedEvent] | None = None
        self._stream = SimulatedStream(self)

    @property
    def busy(self) -> bool:
        return self.free_at > self.now + 1e-15

    def kernel(self, durations: float | Sequence[float] | Callable[[int], float]) -> Callable[[], None]:
        """A zero-argument function whose i-th call does ``durations[i]`` seconds of work on this device.

        ``durations`` may be one number (every call), a sequence (the last value
        repeats) or a function of the call index (0-based).
        """

        def duration(i: int) -> float:
            if callable(durations):
                return float(durations(i))
            if isinstance(durations, (int, float)):
                return float(durations)
            return float(durations[min(i, len(durations) - 1)])

        def fn() -> None:
            i = self.calls
            self.calls += 1
            self.log.append(("call", i))
            if self.asynchronous:
                self.now += self.launch_s
                self.free_at = max(self.free_at, self.now) + duration(i)
            else:
                self.now += duration(i)
                self.free_at = self.now

        fn.__name__ = f"{self.device.type}_kernel"
        return fn

    def synchronize(self, *args: Any, **kwargs: Any) -> None:
        """Wait (in virtual time) until all queued work is finished."""
        self.log.append(("sync", self.busy))
        self.now = max(self.now, self.free_at)

    def read_clock(self) -> float:
        """The virtual host time in seconds (recorded as a ``("clock", busy)`` event)."""
        self.log.append(("clock", self.busy))
        self.readings.append(self.now)
        return self.now

    def events(self, kind: str) -> list[tuple]:
        return [e for e in self.log if e[0] == kind]

    def calls_before_first_clock(self) -> int:
        n = 0
        for e in self.log:
            if e[0] == "clock":
                return n
            n += e[0] == "call"
        return n

    def _clock(self, name: str, original: Callable[[], Any], scale: float) -> Callable[[], Any]:
        offset = 1.7e9 if name.startswith("time") else 0.0  # time.time() counts from 1970

        def read() -> Any:
            if threading.get_ident() != self._owner:
                return original()  # other threads (tqdm, the kernel's heartbeat) keep the real clock
            value = (offset + self.read_clock()) * scale
            return int(round(value)) if name.endswith("_ns") else value

        return read

    def event(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
              external: bool = False) -> SimulatedEvent:
        """An event on this device's queue and clock, as ``torch.cuda.Event(...)`` makes one while active."""
        return self.event_class(enable_timing, blocking, interprocess, external)

    @property
    def event_class(self) -> type[SimulatedEvent]:
        """What ``torch.cuda.Event`` is while active: a class (so ``torch.cuda.Event.elapsed_time(a, b)`` works).

        On ``kind="cpu"`` too, where a mark is reached at once: an event timer
        that forgets its guard is graded once, by :func:`helpers.checks.ch01.check_runs` (the real
        CPU, where ``torch.cuda.Event()`` raises), as an unguarded
        ``torch.cuda.synchronize()`` is.
        """
        if self._event_class is None:
            sim = self

            class Event(SimulatedEvent):
                def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
                             external: bool = False) -> None:
                    super().__init__(sim, enable_timing, blocking, interprocess, external)

            self._event_class = Event
        return self._event_class

    def stream(self, *args: Any, **kwargs: Any) -> SimulatedStream:
        """``torch.cuda.current_stream(device)`` and ``default_stream(device)`` while active: the one queue."""
        return self._stream

    def _generic_event(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """``torch.Event(device=None, *, enable_timing=...)``: this device's event for "cuda" or the default."""

        def make(device: Any = None, *, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False) -> Any:
            if device is None or kind_of(device) == self.device.type:
                return self.event(enable_timing, blocking, interprocess)
            return original(device, enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)

        return make

    def changes(self) -> list[Change]:
        """The clock, synchronisation and event patches that ride on the fake machine."""
        clocks = [(owner, attr, self._clock(name, getattr(owner, attr), scale))
                  for name, (owner, attr, scale) in CLOCKS.items()]
        events = [(torch.cuda, "Event", self.event_class), (torch.cuda, "current_stream", self.stream),
                  (torch.cuda, "default_stream", self.stream)]
        if hasattr(torch, "Event"):
            events.append((torch, "Event", self._generic_event(torch.Event)))
        return clocks + events + [(owner, attr, self.synchronize) for owner, attr in sync_routes()]

    @contextlib.contextmanager
    def active(self, namespaces: Iterable[dict] = ()) -> Iterator["SimulatedDevice"]:
        """Route clocks and synchronisation to this device, on a machine with one GPU (or none for the CPU)."""
        machine = FakeMachine(cuda=1 if self.asynchronous else 0)
        self._owner = threading.get_ident()
        try:
            with machine.active(extra=self.changes(), namespaces=namespaces):
                yield self
        finally:
            self._owner = None
