"""Chapter 01's checks: a correct device-aware timer and a CPU-vs-accelerator comparison.

Nothing here measures real speed, and this module holds only the verdicts.
The timer exercise runs on a simulated GPU
(:class:`~helpers.checks.fakes.simulated_gpu.SimulatedDevice`: a virtual
clock, and a device whose work finishes only when it is synchronised, with
its CUDA events and its stream on the same clock); the comparison exercise
gets its timings injected by a
:class:`~helpers.checks.fakes.comparison.FakeComparison`. Both fakes live in
:mod:`helpers.checks.fakes`; here their records are judged.

Each ``check_*`` function is one grade cell's verdict; it takes the case
(durations, sizes, expected seconds) as arguments, because the hidden cases
stay in the notebook's hidden blocks, never in this public package. A
failure raises :class:`~helpers.checks.CheckFailed` naming the mistake.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from helpers import benchmark
from helpers.benchmark import format_seconds
from helpers.checks import delegation
from helpers.checks.core import CheckFailed, check, check_equal, fail_unless, solved, warnings_dropped
from helpers.checks.delegation import forbid_course_versions
from helpers.checks.fakes.comparison import FakeComparison
from helpers.checks.fakes.machine import cpu_only_machine
from helpers.checks.fakes.simulated_gpu import NO_EVENTS, NOT_COMPLETED, NOT_RECORDED, NOT_TIMED, SimulatedDevice
from helpers.checks.patching import patched
from helpers.i18n import N_, _
from helpers.record import Record

__all__ = [
    "as_seconds",
    "check_crossover",
    "check_median",
    "check_no_accelerator",
    "check_runs",
    "check_speedup",
    "check_sync",
    "check_untimed_setup",
    "check_untimed_warmup",
    "check_warmup",
    "crossover_verdict",
    "no_accelerator_verdict",
    "setup_verdict",
    "simulate_timer",
    "speedup_verdict",
    "sync_functions",
]

# Messages used by more than one verdict: English here (N_), translated where they are shown (_()).
NEVER_CALLED = N_("time_on_device never called fn(): call it `warmup` times untimed, then `repeats` times timed.")
NO_WARMUP = N_("no warm-up: make `warmup` untimed calls of fn() before the timed ones, so one-off start-up costs "
               "are not measured.")
CROSSOVER = "helpers.benchmark:crossover"  # the course's crossover: judged by the crossover check only

def as_seconds(value: Any) -> float | None:
    """``value`` as a float when it is one finite number (int, float, NumPy scalar, one-element tensor), else None.

    A timer may return ``statistics.median`` (float), ``numpy.median``
    (numpy.float64) or ``torch.tensor(times).median()`` (a 0-d tensor): all are seconds.
    """
    if isinstance(value, (bool, str, bytes)) or value is None:
        return None
    if isinstance(value, torch.Tensor) and (value.numel() != 1 or value.is_complex() or value.dtype == torch.bool):
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if math.isfinite(seconds) else None


def _namespaces(fn: Any) -> list[dict]:
    """The learner's module globals, where ``from time import perf_counter`` binds a name the checks replace."""
    return [fn.__globals__] if hasattr(fn, "__globals__") else []


# --------------------------------------------------------------------------- the simulated device's mistakes


# Each misuse in words (N_: translated where shown, by event_mistake), around torch's own error, which stays
# English in both editions as torch raises it: {error} is filled from EVENT_ERRORS.
EVENT_MISTAKES = {
    "untimed": N_("the events were created without enable_timing=True: torch.cuda.Event() cannot time anything "
                  "(elapsed_time raises ValueError: {error}) Create both with torch.cuda.Event(enable_timing=True)."),
    "unrecorded": N_("elapsed_time was called on an event that was never recorded (ValueError: {error}) Call "
                     "start.record() before fn() and end.record() after it."),
    "pending": N_("elapsed_time was read before the end event had finished: the events were recorded, but the host "
                  "did not wait for the end event, so on a GPU the time is not known yet (RuntimeError: {error}) "
                  "Call end.synchronize() after end.record() and before start.elapsed_time(end)."),
}
EVENT_ERRORS = {"untimed": NOT_TIMED, "unrecorded": NOT_RECORDED, "pending": NOT_COMPLETED}


def trusted_log(fake: Any, log: Record) -> None:
    """Fail unless ``fake.log`` is still ``log`` and holds exactly what the course's code recorded: a verdict read
    from a log the learner's code cleared or rewrote would be the learner's verdict, not the check's."""
    check(fake.log is log and log.intact() and getattr(fake, "readings", log).intact(),
          _("while this check watched your code, your code changed the check's record of what it did (the log of "
            "its simulated device); the check cannot judge from it. Time the work through the functions you were "
            "given; leave the check's objects alone."))


def simulate_timer(timer: Callable[..., Any], kind: str | torch.device,
                   durations: float | Sequence[float] | Callable[[int], float],
                   device: str | torch.device | None = None, **kwargs: Any) -> tuple[SimulatedDevice, Any]:
    """Run ``timer(fn, device, **kwargs)`` on a fresh :class:`SimulatedDevice` of ``kind``; return (device, result).

    ``fn`` is the simulated device's kernel of ``durations``; ``device``
    defaults to the simulated ``torch.device``. The call goes through
    :func:`~helpers.checks.solved` (an unsolved stub says so; the course's own
    timer is a tripwire). When a device *name* (a str) makes the timer raise,
    it runs again, on a fresh device, with ``torch.device(name)``: accepting a
    name is graded once, by :func:`check_runs`, so one slip does not cost every check.
    """

    def attempt(arg: Any) -> tuple[SimulatedDevice, Any]:
        sim = SimulatedDevice(str(kind))
        log = sim.log
        try:
            with sim.active(_namespaces(timer)), warnings_dropped():
                result = solved(timer, sim.kernel(durations), sim.device if arg is None else arg, **kwargs)
            trusted_log(sim, log)
            return sim, result
        except CheckFailed:
            raise
        except Exception:  # noqa: BLE001 - an event misused: torch's error, named as the mistake
            if (mistake := event_mistake(sim)) is not None:
                raise CheckFailed(mistake) from None
            raise

    try:
        return attempt(device)
    except CheckFailed:
        raise
    except Exception:  # noqa: BLE001 - retried once with a torch.device, else re-raised
        if not isinstance(device, str):
            raise
    return attempt(torch.device(device))


# --------------------------------------------------------------------------- verdicts: the timer


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else ""


def _device_text(device: Any) -> str:
    return f"torch.device({str(device)!r})" if isinstance(device, torch.device) else repr(device)


def _crash(err: Exception, device: Any, events_tried: bool = False) -> CheckFailed:
    crashed = {"kind": type(err).__name__, "error": _first_line(err)}
    if events_tried:
        return CheckFailed(_(
            "time_on_device raised {kind} ({error}) timing work on the CPU of a machine without a GPU, after it "
            "created a torch.cuda.Event: CUDA events exist only on a CUDA GPU (on a machine without one, "
            "torch.cuda.Event() raises). Time with events only when device.type == 'cuda', and time every other "
            "device with a host clock (time.perf_counter) and dev.synchronize(device).").format(**crashed))
    if isinstance(device, str):
        return CheckFailed(_(
            "time_on_device raised {kind} ({error}) timing work on the CPU with the device given as a string, "
            "{device!r}. `device` may be a torch.device or a string: convert it first with "
            "device = torch.device(device) (a string has no .type).").format(device=device, **crashed))
    return CheckFailed(_(
        "time_on_device raised {kind} ({error}) timing work on the CPU of a machine without a GPU. "
        "torch.cuda.synchronize() raises there (so do torch.accelerator.synchronize() and torch.mps.synchronize()): "
        "synchronise only a GPU (if device.type == 'cuda') or use dev.synchronize(device), which is safe "
        "everywhere.").format(**crashed))


def _time_on_cpu(timer: Callable[..., Any], device: Any, **kwargs: Any) -> tuple[int, Any]:
    """(calls of fn, result) of the timer on real CPU work, as a laptop without a GPU runs it."""
    g = torch.Generator().manual_seed(0)  # the learner's global random state stays as it was
    a, b = torch.randn(64, 64, generator=g), torch.randn(64, 64, generator=g)
    calls, events = [], []

    def fn() -> torch.Tensor:
        calls.append(1)
        return a @ b

    def no_events(*args: Any, **kwargs: Any) -> None:  # what torch.cuda.Event() does on a CPU-only build
        events.append(1)
        raise RuntimeError(NO_EVENTS)

    try:
        with cpu_only_machine(), patched([(torch.cuda, "Event", no_events)], _namespaces(timer)), \
                forbid_course_versions(getattr(timer, "__name__", "")), warnings_dropped():
            result = timer(fn, device, **kwargs)
        return len(calls), result
    except CheckFailed:
        raise
    except NotImplementedError as err:
        if err.args:
            raise
        solved(timer, lambda: None, device, **kwargs)  # raises "`time_on_device` is not written yet"
        raise
    except Exception as err:  # noqa: BLE001 - a crash becomes a message naming its cause
        raise _crash(err, device, bool(events)) from None


def check_runs(time_on_device: Callable[..., Any], device: Any, warmup: int, repeats: int) -> None:
    """``time_on_device`` times real CPU work on a machine without a GPU and returns a number of seconds."""
    calls, result = _time_on_cpu(time_on_device, device, warmup=warmup, repeats=repeats)
    how = f"(fn, {_device_text(device)}, warmup={warmup}, repeats={repeats})"
    check(calls > 0 or warmup + repeats == 0, _(NEVER_CALLED))
    seconds = as_seconds(result)
    check(seconds is not None,
          _("time_on_device{how} returned {result!r} ({kind}); expected one number, the seconds per call.").format(
              how=how, result=result, kind=type(result).__name__))
    check(seconds >= 0, _("time_on_device{how} returned {seconds!r}, a negative time: subtract the start from the "
                          "end, end - start.").format(how=how, seconds=seconds))


def event_mistake(sim: SimulatedDevice) -> str | None:
    """The first misuse of an event's ``elapsed_time`` (see :data:`EVENT_MISTAKES`), in words; None if none."""
    mistakes = [m for _, m in sim.events("elapsed") if m != "ok"]
    return _(EVENT_MISTAKES[mistakes[0]]).format(error=EVENT_ERRORS[mistakes[0]]) if mistakes else None


def event_verdict(sim: SimulatedDevice, result: Any, kernel_s: float) -> str | None:
    """None if a timer that times with events returned the seconds of one call, else the mistake in words.

    The events' marks sit in the device's queue, so they time the device's
    work whenever the host reads them, once the end mark is reached (a wait on
    it, ``end.synchronize()``, or on the whole device). ``elapsed_time`` is in
    milliseconds. A launch or two between the marks is part of what a GPU
    measures too, hence the tolerance.
    """
    if (mistake := event_mistake(sim)) is not None:
        return mistake
    seconds = as_seconds(result)
    if seconds is None:
        return _not_a_number(result)
    slack = 0.1 * kernel_s + 2 * sim.launch_s
    if abs(seconds - kernel_s) <= slack:
        return None
    got, each = format_seconds(seconds), format_seconds(kernel_s)
    if abs(seconds - kernel_s * 1e3) <= 1e3 * slack:
        return _("milliseconds returned as seconds: time_on_device returned {got} for work that takes {each} a "
                 "call. start.elapsed_time(end) is in milliseconds: divide it by 1000 (elapsed_time(end) / 1e3)."
                 ).format(got=got, each=each)
    return _("time_on_device returned {got} for work that takes {each} a call, timed with events: record the start "
             "event just before fn() and the end event just after it, start.record(); fn(); end.record(), then "
             "end.synchronize() and start.elapsed_time(end) / 1e3, and return the median of those seconds."
             ).format(got=got, each=each)


def _not_a_number(result: Any) -> str:
    """What a timer that returned something other than one number of seconds is told (two verdicts say it)."""
    return _("time_on_device returned {result!r} ({kind}); expected one number, in seconds.").format(
        result=result, kind=type(result).__name__)


def sync_verdict(sim: SimulatedDevice, result: Any, kernel_s: float, timer: Any = None) -> str | None:
    """None if no clock was read while queued work was unfinished, else the mistake in words.

    ``timer`` (the learner's function) lets it tell "never synchronises" from
    "has a synchronisation that never ran": a guard that is always false. A
    timer that times with CUDA events (``elapsed_time`` was read) is judged by
    :func:`event_verdict` instead: its marks are in the device's queue, so host
    clock reads do not matter to it.
    """
    clocks = sim.events("clock")
    if not sim.calls:
        return _(NEVER_CALLED)
    if sim.events("elapsed"):
        return event_verdict(sim, result, kernel_s)
    if not clocks:
        return _("time_on_device never read a host clock (perf_counter, monotonic, time.time): time each call with "
                 "one. (time.process_time and thread_time count CPU time, not wall-clock time.)")
    busy_reads = [i for i, (_, busy) in enumerate(clocks) if busy]
    if not busy_reads:
        return None  # what it returns is the business of the median check
    got, each = format_seconds(as_seconds(result)), format_seconds(kernel_s)
    if not sim.events("sync") and (functions := sync_functions(timer)):
        return _guard_message(functions, sim.device, got, each)
    if not sim.events("sync"):
        return _("no synchronisation: time_on_device returned {got} for work that takes {each} a call on a "
                 "(simulated) GPU, because it never synchronised the device, so the clock stopped when the work was "
                 "queued, not when it was done. Call dev.synchronize(device) before every clock read."
                 ).format(got=got, each=each)
    if busy_reads == [0]:
        return _("the clock was started while the warm-up was still running on the device: synchronise after "
                 "the warm-up, before the first clock read (time_on_device returned {got}; each call takes {each})."
                 ).format(got=got, each=each)
    return _("the clock was read while queued work was still running: time_on_device synchronised only "
             "before starting the clock, so it stopped the clock when the work was queued, not done "
             "(returned {got}; each call takes {each}). Synchronise before every clock read, the one that stops "
             "the clock included.").format(got=got, each=each)


def _names(code: Any) -> set[str]:
    """The global and attribute names ``code`` and the functions nested in it use."""
    names: set[str] = set()
    stack = [code]
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        stack.extend(k for k in c.co_consts if hasattr(k, "co_names"))
    return names


def sync_functions(fn: Any, depth: int = 3) -> list[Any]:
    """``fn`` and the learner's own functions it calls (same module or enclosing scope, ``depth`` levels deep)
    whose code names ``synchronize``."""
    code = getattr(fn, "__code__", None)
    if code is None or depth < 0:
        return []
    names, scope = _names(code), getattr(fn, "__globals__", {})
    found = [fn] if "synchronize" in names else []
    enclosed = [cell.cell_contents for cell in getattr(fn, "__closure__", None) or () if _filled(cell)]
    for helper in [scope.get(name) for name in sorted(names)] + enclosed:
        if helper is not fn and getattr(helper, "__globals__", None) is scope:
            found += [h for h in sync_functions(helper, depth - 1) if h not in found]
    return found


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # a closure variable not assigned yet
        return False
    return True


def _guard_line(functions: Sequence[Any]) -> str | None:
    """The ``if``/``elif`` line nearest above the first line that synchronises, where the source can be read."""
    for fn in functions:
        try:
            lines = inspect.getsource(fn).splitlines()
        except (OSError, TypeError):
            continue
        first = next((i for i, line in enumerate(lines) if "synchronize" in line), None)
        if first is not None:
            return next((a.strip() for a in reversed(lines[:first + 1]) if re.match(r"\s*(el)?if\b", a)), None)
    return None


def _guard_message(functions: Sequence[Any], device: torch.device, got: str, each: str) -> str:
    line = _guard_line(functions)
    quoted = f" (`{line}`)" if line else ""  # the learner's own code, quoted: the same in every language
    return _("the synchronisation never ran: time_on_device has a synchronize call, but on a (simulated) GPU, "
             "device={device}, the guard around it{quoted} was always false, so the clock stopped "
             "when the work was queued (it returned {got}; each call takes {each}). A torch.device never equals a "
             "string (torch.device('cuda') == 'cuda' is False), a device may be 'cuda:0' rather than 'cuda', and "
             "`is` compares identity, not value: test device.type == 'cuda' on a torch.device (after "
             "device = torch.device(device)), or call dev.synchronize(device), which is right on every device."
             ).format(device=_device_text(device), quoted=quoted, got=got, each=each)


def check_sync(time_on_device: Callable[..., Any], kernel_s: float, warmup: int, repeats: int,
               device: Any = None) -> None:
    """On a simulated GPU whose calls queue ``kernel_s`` of work, every clock read comes after a synchronisation."""
    sim, result = simulate_timer(time_on_device, "cuda", kernel_s, device, warmup=warmup, repeats=repeats)
    fail_unless(sync_verdict(sim, result, kernel_s, time_on_device))


def check_warmup(time_on_device: Callable[..., Any], warmup: int, repeats: int, device: Any = None) -> None:
    """``fn`` is called ``warmup + repeats`` times."""
    sim = simulate_timer(time_on_device, "cpu", 0.001, device, warmup=warmup, repeats=repeats)[0]  # `_` is gettext here
    hint = (_(NEVER_CALLED) if sim.calls == 0 else _(NO_WARMUP) if sim.calls == repeats else
            _("fn must be called `warmup` times untimed (warm-up), then `repeats` times timed."))
    check_equal(sim.calls, warmup + repeats,
                _("calls of fn with warmup={warmup}, repeats={repeats}").format(warmup=warmup, repeats=repeats), hint)


def _middle(values: Sequence[float]) -> tuple[float, float]:
    """The lower and upper middle of ``values`` (equal for an odd count): any median convention lies between."""
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2], ordered[len(ordered) // 2]


def _within(seconds: float, low: float, high: float, scale: float = 1.0) -> bool:
    return low * scale * (1 - 1e-3) <= seconds <= high * scale * (1 + 1e-3)


def measured(sim: SimulatedDevice, seconds: float) -> bool:
    """Whether the clock reads show ``seconds``: it lies between the shortest and the longest interval between
    two consecutive clock reads (the intervals that timed something). A timer that times with CUDA events is
    judged by :func:`event_verdict` instead. A right number the clock never showed was not measured: it was read
    out of the simulated device (its kernel's durations, its queue), which a learner's code can reach."""
    if sim.events("elapsed"):
        return True
    readings = list(sim.readings)
    gaps = [b - a for a, b in zip(readings, readings[1:]) if b - a > 1e-12]
    return bool(gaps) and min(gaps) * (1 - 1e-3) <= seconds <= max(gaps) * (1 + 1e-3)


NOT_MEASURED = N_("time_on_device returned {got}, the right time, but no interval between its clock reads shows "
                  "it: the result must come from reading a clock (after a synchronize) around the calls, not from "
                  "the simulated device's own numbers. Time the calls; leave the check's objects alone.")


def untimed_warmup_verdict(sim: SimulatedDevice, result: Any, warmup: int, durations: Sequence[float]) -> str | None:
    """None unless the slow warm-up calls are in the result (timing them and dropping their times is fine)."""
    low, high = _middle(durations[warmup:])
    seconds = as_seconds(result)
    if seconds is not None and _within(seconds, low, high) and not measured(sim, seconds):
        return _(NOT_MEASURED).format(got=format_seconds(seconds))
    if sim.calls != len(durations) or seconds is None or _within(seconds, low, high):
        return None  # the call count and the statistic are the business of the checks around this one
    timed_warmups = warmup - min(warmup, sim.calls_before_first_clock())
    if timed_warmups and high < seconds <= max(durations) * (1 + 1e-3):
        return _("the warm-up was timed: {timed} of the {warmup} (slow) warm-up calls came after the first "
                 "clock read, and time_on_device returned {got} where the calls after the "
                 "warm-up take {each}. Make the warm-up calls first, untimed (or leave their "
                 "times out), then time only the `repeats` calls.").format(
                     timed=timed_warmups, warmup=warmup, got=format_seconds(seconds), each=format_seconds(low))
    return None


def check_untimed_warmup(time_on_device: Callable[..., Any], durations: Sequence[float], warmup: int,
                         device: Any = None) -> None:
    """With slow first calls (``durations[:warmup]``), the result is a median of the calls after them."""
    sim, result = simulate_timer(time_on_device, "cpu", list(durations), device, warmup=warmup,
                                 repeats=len(durations) - warmup)
    fail_unless(untimed_warmup_verdict(sim, result, warmup, durations))


def _median_mistake(seconds: float, timed: Sequence[float]) -> str:
    """Which wrong statistic ``seconds`` is, in words (the result is not a median of ``timed``)."""
    low, high = _middle(timed)
    what = _("time_on_device returned {got} where the median call takes {median}").format(
        got=format_seconds(seconds), median=format_seconds(low))

    def near(value: float) -> bool:
        return abs(seconds - value) <= 1e-3 * abs(value)

    if near(sum(timed)):
        mistake = _("{what}: that is the total of the timed calls. Return the median of the per-call times.")
    elif near(sum(timed) / len(timed)):
        mistake = _("{what}: that is the mean, which one slow call pulls up. Return the median of the per-call "
                    "times (statistics.median).")
    elif near(min(timed)):
        mistake = _("{what}: that is the minimum, the fastest call, not a typical one. Return the median of the "
                    "per-call times (statistics.median).")
    elif _within(seconds, low, high, 1e9):
        mistake = _("{what}: that looks like nanoseconds. Return seconds (divide a *_ns clock by 1e9).")
    elif _within(seconds, low, high, 1e3):
        mistake = _("{what}: that looks like milliseconds. Return seconds, as the clock gives them.")
    elif near(timed[len(timed) // 2]) or near(timed[(len(timed) - 1) // 2]):
        mistake = _("{what}: that is the middle time in the order the calls were made. Sort the times first "
                    "(sorted(times)), or use statistics.median, which sorts them.")
    else:
        mistake = _("{what}. Return the median of the per-call times, in seconds.")
    return mistake.format(what=what)


def median_verdict(sim: SimulatedDevice, result: Any, durations: Sequence[float], repeats: int) -> str | None:
    """None if ``result`` is the median (any convention for an even count) of the calls the timer timed.

    Those are the last ``repeats`` calls, or every call after the first clock
    read (a timer that timed its warm-up loses the warm-up check, not this one).
    """
    seconds = as_seconds(result)
    if seconds is None:
        return _not_a_number(result)
    timed = list(durations[max(sim.calls - repeats, 0):sim.calls])
    if not timed:
        return _(NEVER_CALLED)
    windows = [timed, list(durations[sim.calls_before_first_clock():sim.calls])]
    if any(w and _within(seconds, *_middle(w)) for w in windows):
        return None if measured(sim, seconds) else _(NOT_MEASURED).format(got=format_seconds(seconds))
    return _median_mistake(seconds, timed)


def check_median(time_on_device: Callable[..., Any], durations: Sequence[float], warmup: int, repeats: int,
                 device: Any = None) -> None:
    """The result is the median seconds of ONE timed call (not a mean, a total, a minimum, or in other units)."""
    sim, result = simulate_timer(time_on_device, "cpu", list(durations), device, warmup=warmup, repeats=repeats)
    fail_unless(median_verdict(sim, result, durations, repeats))


# --------------------------------------------------------------------------- verdicts: the injected comparison


def _floats(values: Any) -> list[float] | None:
    try:
        return [float(v) for v in values]
    except (TypeError, ValueError):
        return None


KEYS = ["accelerator", "sizes", "cpu_s", "accelerator_s", "speedup", "crossover"]


def _missing(result: Any, keys: Sequence[str]) -> str | None:
    if not isinstance(result, dict):
        return _("compare_devices returned a {kind}; expected a dict with the keys {keys}.").format(
            kind=type(result).__name__, keys=list(keys))
    missing = [k for k in keys if k not in result]
    if missing:
        return _("compare_devices returned a dict without the keys {missing}; expected all of {keys}.").format(
            missing=missing, keys=list(keys))
    return None


def speedup_verdict(fake: FakeComparison, result: Any, sizes: Sequence[int]) -> str | None:
    """None if both devices were timed with the given timer and the speed-ups are CPU time / accelerator time,
    else the mistake in words."""
    if (msg := _missing(result, KEYS)) is not None:
        return msg
    timed = {(n, k) for _, n, k, _ in (e for e in fake.log if e[0] == "time")}
    untimed = [(n, k) for k in fake.seconds for n in sizes if (n, k) not in timed]
    if untimed and fake.wrong_device():
        return _wrong_device_message(fake)
    if untimed:
        return _("the work for {untimed} (size, device) was not timed with the `timer` compare_devices was "
                 "given: call timer(fn, device), not time_on_device directly. The checks pass their own timer so "
                 "that they do not depend on how fast this machine is.").format(untimed=untimed)
    if _floats(result["sizes"]) != [float(n) for n in sizes]:
        return _('"sizes": got {got!r}; expected the sizes given, {sizes}.').format(got=result["sizes"],
                                                                                   sizes=list(sizes))
    if result["accelerator"] is None:
        return _('"accelerator" is None although an accelerator was given; return the accelerator.')
    for key, want in (("cpu_s", fake.seconds["cpu"]), ("accelerator_s", fake.seconds["cuda"])):
        got = _floats(result[key])
        if got is None or len(got) != len(want) or any(abs(g - w) > 1e-9 * w for g, w in zip(got, want)):
            return _('"{key}": got {got!r}; expected the timer\'s seconds per call for each size, {want}. Time '
                     "make_work(size, device) on each device with `timer`, in the order of the sizes.").format(
                         key=key, got=result[key], want=want)
    return _ratio_verdict(fake, result["speedup"])


def _ratio_verdict(fake: FakeComparison, speedup: Any) -> str | None:
    want, got = fake.speedups(), _floats(speedup)
    if got is not None and len(got) == len(want):
        if all(abs(g - s) <= 1e-6 * s for g, s in zip(got, want)):
            return None
        if all(abs(g * s - 1) <= 1e-6 for g, s in zip(got, want)):
            return _('"speedup": got {got}, the inverted ratio accelerator / CPU; expected CPU time divided by '
                     "accelerator time, {want} (above 1 means the accelerator is faster).").format(got=got,
                                                                                                  want=want)
    return _('"speedup": got {got!r}; expected cpu_s / accelerator_s per size, {want}.').format(got=speedup,
                                                                                               want=want)


def crossover_verdict(fake: FakeComparison, result: Any, sizes: Sequence[int]) -> str | None:
    """Judged against the true speed-ups, the injected CPU seconds over the accelerator's.

    A crossover computed right from the learner's own speed-ups passes too,
    when those come from a measurement (every size made or timed on both
    devices): a wrong ratio (inverted, say) is charged to the speed-up check
    once, whether the crossover was computed from it or from the times.
    """
    if (msg := _missing(result, ["crossover", "speedup"])) is not None:
        return msg
    want, got = benchmark.crossover(sizes, fake.speedups()), result["crossover"]
    if _same_size(got, want):
        return None
    own = _floats(result["speedup"]) if result["speedup"] is not None else None
    if (fake.measured(sizes) and own is not None and len(own) == len(sizes) and all(map(math.isfinite, own))
            and _same_size(got, benchmark.crossover(sizes, own))):
        return None
    return _crossover_mistake(got, want, list(sizes), fake.speedups())


def _wrong_device_message(fake: FakeComparison) -> str:
    n, kind, with_ = fake.wrong_device()[0]
    sizes = sorted({e[0] for e in fake.wrong_device()})
    if with_ not in fake.seconds:
        return _("the work made on {kind} (size {n}) was timed with device={with_}: pass the timer the device "
                 "the inputs were made on, timer(fn, device), so it synchronises that device.").format(
                     kind=kind, n=n, with_=with_)
    return _("inputs made on the wrong device: the {with_} timings (sizes {sizes}) timed work that "
             "make_work(size, {kind!r}) made, so they measure the {kind}, not the {with_}. Make each device's "
             "inputs on that device, fn = make_work(size, device), and time that fn with timer(fn, device)."
             ).format(with_=with_, sizes=sizes, kind=kind)


def setup_verdict(fake: FakeComparison, sizes: Sequence[int], devices: Sequence[str]) -> str | None:
    """None if every size's inputs were made on each device outside the timed region and timed with that device,
    else the mistake in words."""
    inside = [(n, k) for _, n, k, timed in (e for e in fake.log if e[0] == "make") if timed]
    if inside:
        return _("inputs were created inside the timed region: make_work(size, device) ran while the timer was "
                 "timing (for {inside}). Call make_work before timing and pass the timer only the function it "
                 "returns, so creating the inputs is not measured.").format(inside=inside)
    if fake.wrong_device():
        return _wrong_device_message(fake)
    made = {(n, k) for _, n, k, _ in (e for e in fake.log if e[0] == "make")}
    want = {(n, k) for n in sizes for k in devices}
    if not want <= made:
        return _("make_work was not called for every size on every device outside the timed region: missing "
                 "{missing}. Make the inputs on each device with make_work(size, device).").format(
                     missing=sorted(want - made))
    return None


def no_accelerator_verdict(fake: FakeComparison, call: Callable[[], Any], sizes: Sequence[int]) -> str | None:
    """None if ``call()`` (the comparison with ``accelerator=None``) timed the CPU and left every accelerator key
    None, else the mistake in words."""
    try:
        result = call()
    except AssertionError:
        raise
    except Exception as err:  # noqa: BLE001 - the learner's error is the outcome to report
        return _("with accelerator=None (no accelerator), compare_devices raised {kind}: {error}. Time the CPU, "
                 'then return None for "accelerator", "accelerator_s", "speedup" and "crossover".').format(
                     kind=type(err).__name__, error=_first_line(err))
    if (msg := _missing(result, KEYS)) is not None:
        return _("with no accelerator: {problem}").format(problem=msg)
    not_none = [k for k in ("accelerator", "accelerator_s", "speedup", "crossover") if result[k] is not None]
    if not_none:
        return _("with no accelerator (accelerator=None), {keys} should be None: there is nothing to "
                 "compare the CPU with; got {got}.").format(keys=not_none, got=[result[k] for k in not_none])
    other = sorted({e[2] for e in fake.log if e[2] != "cpu"})
    if other:
        return _("with no accelerator, compare_devices still made or timed work on {other}; use only the CPU."
                 ).format(other=other)
    got = _floats(result["cpu_s"]) if result["cpu_s"] is not None else None
    if not any(e[0] == "time" for e in fake.log):  # the given timer was ignored: the speed-up check says so
        if got is not None and len(got) == len(sizes) and all(v > 0 for v in got):
            return None
    if got != [float(v) for v in fake.seconds["cpu"]]:
        return _('with no accelerator, "cpu_s" should still hold the CPU\'s seconds per call, {want}; got '
                 "{got!r}.").format(want=fake.seconds["cpu"], got=result["cpu_s"])
    return None


def _same_size(got: Any, want: int | None) -> bool:
    """``got`` is the size ``want`` (or both None); a NumPy or one-element tensor integer counts as the size."""
    if got is None or want is None:
        return got is None and want is None
    return as_seconds(got) == float(want)


def _crossover_mistake(got: Any, want: int | None, sizes: list[int], speedup: list[float]) -> str:
    text = _('"crossover": got {got!r}; expected {want!r}, for speed-ups {speedups} at sizes {sizes}: the crossover '
             "is the smallest size from which the accelerator is faster (speed-up > 1) at that size and every larger "
             "one; None if it is not faster at the largest size.").format(
                 got=got, want=want, speedups=[round(s, 3) for s in speedup], sizes=sizes)
    first = next((n for n, s in zip(sizes, speedup) if s > 1), None)
    if got == first and first != want:
        text += " " + _("{first} is the first size where it wins, but it loses again at a larger size.").format(
            first=first)
    if any(s == 1 for s in speedup) and got == benchmark.crossover(sizes, [s + (s == 1) for s in speedup]):
        text += " " + _("A speed-up of exactly 1 is a tie: the accelerator is not faster there.")
    if want == sizes[0] and got is None:
        text += " " + _("The accelerator is faster at every size here, so the crossover is the smallest size.")
    return text


# --------------------------------------------------------------------------- verdicts: the comparison


@contextlib.contextmanager
def _crossover_allowed(fn: Any) -> Iterator[None]:
    """While the block runs, ``bench.crossover`` is no tripwire: only the crossover check judges it."""
    name = getattr(fn, "__name__", "")
    listed = delegation.COURSE_VERSIONS.get(name, {})
    kept = {spec: when for spec, when in listed.items() if spec != CROSSOVER}
    token = object()
    sys.audit("course.allow", "push", CROSSOVER, token)  # the grader's referee lifts it too
    try:
        with patched([(delegation, "COURSE_VERSIONS", {**delegation.COURSE_VERSIONS, name: kept})]):
            yield
    finally:
        sys.audit("course.allow", "pop", CROSSOVER, token)


def _compare(compare_devices: Callable[..., Any], fake: FakeComparison, sizes: Sequence[int], accelerator: Any,
             *, crossover_is_judged: bool = False) -> Any:
    allowed = contextlib.nullcontext() if crossover_is_judged else _crossover_allowed(compare_devices)
    log = fake.log
    with fake.active(_namespaces(compare_devices)), allowed, warnings_dropped():
        result = solved(compare_devices, fake.make_work, list(sizes), accelerator, timer=fake.timer)
    trusted_log(fake, log)
    return result


def check_speedup(compare_devices: Callable[..., Any], sizes: Sequence[int], cpu_s: Sequence[float],
                  accelerator_s: Sequence[float], accelerator: Any = "cuda") -> None:
    """Both devices are timed with the given timer, and the speed-ups are CPU time / accelerator time."""
    fake = FakeComparison({"cpu": cpu_s, "cuda": accelerator_s})
    result = _compare(compare_devices, fake, sizes, accelerator)
    fail_unless(speedup_verdict(fake, result, sizes))


def check_crossover(compare_devices: Callable[..., Any], sizes: Sequence[int], cpu_s: Sequence[float],
                    accelerator_s: Sequence[float], accelerator: Any = "cuda") -> None:
    """The crossover is the smallest size from which the accelerator wins at every larger size."""
    fake = FakeComparison({"cpu": cpu_s, "cuda": accelerator_s})
    result = _compare(compare_devices, fake, sizes, accelerator, crossover_is_judged=True)
    fail_unless(crossover_verdict(fake, result, sizes))


def check_untimed_setup(compare_devices: Callable[..., Any], sizes: Sequence[int], cpu_s: Sequence[float],
                        accelerator_s: Sequence[float], accelerator: Any = "cuda") -> None:
    """The inputs are made on each device before timing, and timed with the device they were made on."""
    fake = FakeComparison({"cpu": cpu_s, "cuda": accelerator_s}, run_timed=True)
    _compare(compare_devices, fake, sizes, accelerator)
    fail_unless(setup_verdict(fake, sizes, ["cpu", "cuda"]))


def check_no_accelerator(compare_devices: Callable[..., Any], sizes: Sequence[int], cpu_s: Sequence[float]) -> None:
    """With ``accelerator=None`` the CPU is still timed and everything about the accelerator is None."""
    fake = FakeComparison({"cpu": cpu_s})
    fail_unless(no_accelerator_verdict(fake, lambda: _compare(compare_devices, fake, sizes, None), sizes))
