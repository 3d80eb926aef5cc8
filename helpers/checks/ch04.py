"""Verdicts for chapter 04 (data loading): a loader set up for the device, workers picked by
measurement, a worker_init_fn that seeds NumPy per worker and per epoch.

Generic on purpose: each function takes a case's inputs (the machine, the
counts, the seeds) from the grade cell, so the hidden cases stay in the
cells. What a worker process runs here is importable (the draw dataset)
or a notebook function sent by value (:func:`helpers.processes.portable`), so
the checks work under the spawn start method too. Worker counts and
datasets are tiny: a class is graded in minutes.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import io
import os
import re
import statistics
import sys
import traceback
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler, TensorDataset, get_worker_info

from helpers.checks.core import CheckFailed, check, solved, warnings_dropped
from helpers.checks.delegation import forbid_course_versions
from helpers.checks.fakes.machine import FakeMachine
from helpers.i18n import _
from helpers.processes import PortableError, busy_factor, portable

_HELPERS = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_PYTHON = os.path.dirname(os.__file__) + os.sep

__all__ = [
    "FakeMeasure",
    "check_loader_order",
    "check_loader_pinning",
    "check_loader_workers",
    "check_pick",
    "check_pick_all_fail",
    "check_worker_init",
]


# --------------------------------------------------------------------------- exercise 1: loader_for


def _build(fn: Callable[..., Any], dataset: Dataset, device: Any, batch_size: int, num_workers: int,
           seed: int) -> DataLoader:
    call = f"loader_for(dataset, {device!r}, batch_size={batch_size}, num_workers={num_workers}, seed={seed})"
    try:
        loader = solved(fn, dataset, device, batch_size, num_workers, seed)
    except ValueError as err:
        text = str(err)
        if "prefetch_factor" in text:
            raise CheckFailed(_("{call} raised ValueError: {text} prefetch_factor with 0 workers is an error: there is "
                                "no worker to prefetch. Pass prefetch_factor only when num_workers > 0.").format(
                call=call, text=text)) from None
        if "persistent_workers" in text:
            raise CheckFailed(_("{call} raised ValueError: {text} persistent_workers with 0 workers is an error: there "
                                "is no worker to keep. Pass persistent_workers=True only when num_workers > 0.").format(
                call=call, text=text)) from None
        raise
    except (AttributeError, TypeError) as err:
        if not isinstance(device, torch.device):
            raise
        raise CheckFailed(_("{call} raised {kind}: {err}. device may be a torch.device as well as a string (the task "
                            "names both): torch.device(device).type reads either, e.g. "
                            "torch.device(device).type == 'cuda'.").format(call=call, kind=type(err).__name__,
                                                                           err=err)) from None
    check(isinstance(loader, DataLoader), _("{call} returned {kind}; expected a torch.utils.data.DataLoader.").format(
        call=call, kind=type(loader).__name__))
    return loader


def _pins(fn: Callable[..., Any], machine: FakeMachine, device: Any) -> bool:
    """Does ``loader_for(..., device)`` pin on ``machine``? Only the loader's settings are read: a fake machine
    cannot pin pages."""
    with warnings_dropped(), machine.active():
        loader = _build(fn, TensorDataset(torch.arange(8)), device, 4, 2, 0)  # workers: only pinning is graded here
    return loader.pin_memory


def check_loader_pinning(fn: Callable[..., Any], machine: FakeMachine, device: Any, expected: bool) -> None:
    """On ``machine``, ``loader_for(..., device)`` pins memory exactly when the batches go to CUDA.

    A wrong ``pin_memory=True`` is told by what it followed: MPS (no pinned memory there), the machine's
    GPU (the same call pins no more on a machine without one), or nothing (always on).
    """
    pinned = _pins(fn, machine, device)
    said = (_("loader_for(..., device={device!r}) on a machine with {cuda} CUDA GPU(s) and MPS") if machine.mps else
            _("loader_for(..., device={device!r}) on a machine with {cuda} CUDA GPU(s)")).format(device=device,
                                                                                                  cuda=machine.cuda)
    if expected:
        check(pinned is True, _("{said} left pin_memory={pinned!r}: batches going to CUDA should come from pinned "
                                "memory, so that the copy can be asynchronous (non_blocking=True). Set pin_memory=True "
                                "when the device is a CUDA device, any index: torch.device(device).type == 'cuda' is "
                                "True for 'cuda', 'cuda:1' and torch.device('cuda', 1) alike.").format(
            said=said, pinned=pinned))
        return
    if not pinned:
        return
    kind = torch.device(device).type
    if kind == "mps":
        raise CheckFailed(_("{said} set pin_memory=True: MPS does not use pinned memory. Pinned pages let a copy to a "
                            "*CUDA* GPU run asynchronously; torch's DataLoader turns pin_memory off for MPS with a "
                            "warning, and Apple's GPU shares its memory with the CPU. Pin only when "
                            "torch.device(device).type == 'cuda'.").format(said=said))
    if machine.cuda and not _pins(fn, FakeMachine(mps=machine.mps), device):
        raise CheckFailed(_("{said} set pin_memory=True, and on a machine without a GPU the same call did not: "
                            "pinning followed what the machine has, not where the batches go. A GPU machine can train "
                            "on its CPU, and batches for {kind!r} gain nothing from pinned pages. pin follows the "
                            "batches' device: decide from torch.device(device).type == 'cuda', not from "
                            "torch.cuda.is_available().").format(said=said, kind=kind))
    raise CheckFailed(_("{said} set pin_memory=True: pin_memory always on is the mistake. Pinning helps only copies to "
                        "CUDA; for batches that go to {kind!r} it costs time and pins nothing useful, and without CUDA "
                        "torch only warns. Decide from the device the batches go to "
                        "(torch.device(device).type == 'cuda'), not from torch.cuda.is_available().").format(
        said=said, kind=kind))


def check_loader_workers(fn: Callable[..., Any], num_workers: int) -> None:
    """Workers are persistent and prefetch 4 batches each; without workers both stay unset."""
    with warnings_dropped(), FakeMachine().active():
        loader = _build(fn, TensorDataset(torch.arange(8)), "cpu", 4, num_workers, 0)
    check(loader.num_workers == num_workers, _("loader_for(..., num_workers={asked}) made a loader with "
                                               "num_workers={got}: pass the count you were given.").format(
        asked=num_workers, got=loader.num_workers))
    if num_workers:
        check(loader.persistent_workers is True, _("loader_for(..., num_workers={asked}) made a loader with "
                                                   "persistent_workers={got!r}: workers are then started again every "
                                                   "epoch (start-up paid each time). Set persistent_workers=True when "
                                                   "there are workers.").format(asked=num_workers,
                                                                                got=loader.persistent_workers))
        check(loader.prefetch_factor == 4, _("loader_for(..., num_workers={asked}) made a loader with "
                                             "prefetch_factor={got!r}; the task asks for 4 batches prepared ahead per "
                                             "worker.").format(asked=num_workers, got=loader.prefetch_factor))
    else:
        check(not loader.persistent_workers and loader.prefetch_factor is None,
              _("loader_for(..., num_workers=0) made a loader with persistent_workers={persistent!r}, "
                "prefetch_factor={prefetch!r}: leave both unset without workers.").format(
                  persistent=loader.persistent_workers, prefetch=loader.prefetch_factor))


def _order(loader: DataLoader) -> list[int]:
    return [int(v) for batch in loader for v in batch[0].flatten()]


def check_loader_order(fn: Callable[..., Any], n: int, batch_size: int, seeds: Sequence[int]) -> None:
    """Shuffled batches of ``batch_size``; the same seed gives the same order, other seeds another.

    The loaders have 2 workers (so a mistake that shows only without workers
    is graded elsewhere); they end with this check.
    """
    data = TensorDataset(torch.arange(n))
    with warnings_dropped(), FakeMachine().active():
        loaders = [_build(fn, data, "cpu", batch_size, 2, s) for s in (seeds[0], seeds[0], *seeds[1:])]
        size, sampler = loaders[0].batch_size, loaders[0].sampler
        try:
            orders = [_order(loader) for loader in loaders]
        finally:
            del loaders  # persistent workers end with their loaders, before any verdict
    check(size == batch_size, _("loader_for(..., batch_size={batch_size}) made batches of {size}.").format(
        batch_size=batch_size, size=size))
    check(isinstance(sampler, RandomSampler), _("loader_for's loader does not shuffle (its sampler is {sampler}): pass "
                                                "shuffle=True.").format(sampler=type(sampler).__name__))
    check(sorted(orders[0]) == list(range(n)), _("one epoch of loader_for's loader gave the items {items}; expected "
                                                 "each of the {n} items once.").format(items=sorted(orders[0]), n=n))
    check(orders[0] == orders[1], _("two loader_for loaders made with seed={seed} shuffled differently ({one}... and "
                                    "{other}...): the order is not reproducible. Give the DataLoader its own "
                                    "generator=torch.Generator().manual_seed(seed); torch.manual_seed(seed) alone "
                                    "seeds the global generator, which other code keeps drawing from.").format(
        seed=seeds[0], one=orders[0][:6], other=orders[1][:6]))
    check(any(o != orders[0] for o in orders[2:]), _("loader_for loaders made with seeds {seeds} all shuffled the same "
                                                     "way: use the seed you were given, not a constant.").format(
        seeds=list(seeds)))


# --------------------------------------------------------------------------- exercise 2: pick_num_workers


class FakeMeasure:
    """Deterministic stand-in for a throughput measurement: ``measure(count)`` -> samples/s.

    ``table[count]`` is a list of values returned in turn (cycling), or an
    exception raised on every call for that count (a count that fails).
    """

    def __init__(self, table: dict[int, Sequence[float] | BaseException]) -> None:
        self.table = table
        self.calls: dict[int, int] = {}

    def __call__(self, count: int) -> float:
        check(count in self.table, _("pick_num_workers measured num_workers={count!r}, which is not one of the "
                                     "candidate counts {counts}.").format(count=count, counts=sorted(self.table)))
        k = self.calls.get(count, 0)
        self.calls[count] = k + 1
        value = self.table[count]
        if isinstance(value, BaseException):
            raise value
        return float(value[k % len(value)])

    def expected(self, margin: float, repeats: int) -> int:
        """The right answer: smallest count whose median is within ``margin`` of the best median."""
        medians = {c: statistics.median([v[k % len(v)] for k in range(repeats)])
                   for c, v in self.table.items() if not isinstance(v, BaseException)}
        best = max(medians.values())
        return min(c for c, m in medians.items() if m >= (1 - margin) * best)

    def describe(self) -> str:
        return ", ".join(f"{c}: {type(v).__name__}" if isinstance(v, BaseException) else f"{c}: {list(v)}"
                         for c, v in self.table.items())


def _said(fn: Callable[..., Any], *args: Any) -> tuple[Any, str]:
    """``solved(fn, *args)`` and everything it said: printed, written to stderr, logged or warned.

    The task asks for a line about each skipped count; a learner may print it, write it to stderr, log it or
    warn it, and each is right. :func:`solved` already turns stderr, log records and warnings into notes on
    stdout (nbgrader scores 0 for a grade cell that writes to stderr), so stdout holds all of it.
    """
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            result = solved(fn, *args)
    finally:
        print(out.getvalue(), end="")
    return result, out.getvalue()


def _mentions(text: str, count: int, error: BaseException) -> bool:
    """Does a line of ``text`` name ``count`` and why it failed (the error's type or message)?"""
    reasons = [type(error).__name__, str(error), *(a for a in error.args if isinstance(a, str) and a)]
    reasons = [r for r in reasons if r]
    for line in text.splitlines():
        rest = line
        for reason in sorted(reasons, key=len, reverse=True):
            rest = rest.replace(reason, " ")  # the count must be named outside the error's own text
        if re.search(rf"(?<![\w.]){count}(?!\w|\.\d)", rest) and any(r in line for r in reasons):
            return True
    return False


def _own_error(err: BaseException) -> str:
    """Where in the learner's code ``err`` was raised: " (line N: `source`)", or "" when not known."""
    frames = [f for f in traceback.extract_tb(err.__traceback__) if not f.filename.startswith((_HELPERS, _PYTHON))
              and "site-packages" not in f.filename and "dist-packages" not in f.filename]
    if not frames:
        return ""
    last = frames[-1]
    if last.line:
        return _(" (line {lineno}: `{source}`)").format(lineno=last.lineno, source=last.line.strip())
    return _(" (line {lineno})").format(lineno=last.lineno)


def _from_measure(err: BaseException, measure: FakeMeasure) -> BaseException | None:
    """The measurement's exception that ``err`` is, or was raised from; None for an error of the learner's own."""
    failures = [v for v in measure.table.values() if isinstance(v, BaseException)]
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if any(err is f for f in failures):
            return err
        err = err.__cause__ or err.__context__
    return None


def check_pick(fn: Callable[..., Any], table: dict[int, Any], counts: Sequence[int] | None = None,
               margin: float = 0.1, repeats: int = 3, mistake: str = "") -> None:
    """``pick_num_workers(measure, counts, margin, repeats)`` picks the smallest good count, and says which
    counts it skipped."""
    measure = FakeMeasure(table)
    counts = list(table) if counts is None else list(counts)
    expected = measure.expected(margin, repeats)
    call = f"pick_num_workers(measure, {counts}, margin={margin}, repeats={repeats})"
    with warnings_dropped():
        try:
            got, said = _said(fn, measure, counts, margin, repeats)
        except CheckFailed:
            raise
        except Exception as err:  # noqa: BLE001 - what it raised is the learner's mistake to report
            failure = _from_measure(err, measure)
            if failure is not None:
                raise CheckFailed(_("{call} raised {kind}: {err}, with measurements {{{measurements}}}. A count whose "
                                    "measurement fails (a worker that dies, too many open files) cannot be used: catch "
                                    "the exception (any Exception, not one kind), print a line saying which count "
                                    "failed and why, and skip that count.").format(
                    call=call, kind=type(err).__name__, err=err, measurements=measure.describe())) from None
            raise CheckFailed(_("{call} raised {kind}: {err}{where}, with measurements {{{measurements}}}. That error "
                                "comes from your function's own code, not from a measurement: fix that line.").format(
                call=call, kind=type(err).__name__, err=err, where=_own_error(err),
                measurements=measure.describe())) from None
    check(got == expected, _("{call} with measurements {{{measurements}}} returned {got!r}; expected {expected}. "
                             "{hint}").format(call=call, measurements=measure.describe(), got=got, expected=expected,
                                              hint=mistake or _pick_hint(measure, got, expected, margin, repeats)))
    # the example is code, the same in every language: a placeholder keeps its braces out of the message's fields
    example = 'print(f"num_workers={count} skipped: {type(err).__name__}: {err}")'
    for count in counts:
        failure = table.get(count)
        if isinstance(failure, BaseException):
            check(_mentions(said, count, failure),
                  _("{call} skipped num_workers={count} (its measurement raised {kind}: {failure}) but said nothing "
                    "that names that count and why it failed (the error's type or message): the task asks for a "
                    "printed line saying which count failed and why, e.g. {example}. A silent skip hides a broken "
                    "setup. A line on stderr, a logging call or warnings.warn counts too.").format(
                      call=call, count=count, kind=type(failure).__name__, failure=failure, example=example))


def _pick_hint(measure: FakeMeasure, got: Any, expected: int, margin: float, repeats: int) -> str:
    ok = [c for c, v in measure.table.items() if not isinstance(v, BaseException)]
    medians = {c: statistics.median([measure.table[c][k % len(measure.table[c])] for k in range(repeats)]) for c in ok}
    best = max(medians.values(), default=0.0)
    if got in ok and got > expected and abs(medians[expected] - (1 - margin) * best) <= 1e-9 * best:
        return _("num_workers={expected} has a median of {median:g}, exactly (1 - margin) x the best median "
                 "({best:g}): a count at the margin is within it. Keep the counts whose median is >= (1 - margin) x "
                 "the best, not >.").format(expected=expected, median=medians[expected], best=best)
    if got in ok and got > expected:
        return _("The smallest count within {margin:.0%} of the best is wanted (whatever order the counts come in), "
                 "not the most workers: every worker costs start-up time and memory, so take the smallest count that "
                 "is (nearly) as fast; margin is a fraction of the best median.").format(margin=margin)
    if measure.calls and min(measure.calls.get(c, 0) for c in ok) < repeats:
        return _("Measure each count {repeats} times (repeats) and compare medians.").format(repeats=repeats)
    return _("Compare the median of the {repeats} measurements of each count (one disturbed run must not decide), and "
             "keep the counts whose median is at least (1 - margin) x the best median; margin is relative.").format(
        repeats=repeats)


def check_pick_all_fail(fn: Callable[..., Any], table: dict[int, BaseException], repeats: int = 3) -> None:
    """When every count fails, ``pick_num_workers`` raises RuntimeError instead of inventing a count."""
    measure = FakeMeasure(table)
    with warnings_dropped():
        try:
            got, _said_text = _said(fn, measure, list(table), 0.1, repeats)
        except CheckFailed:
            raise
        except RuntimeError:
            return
        except Exception as err:  # noqa: BLE001 - the wrong exception is the mistake to report
            raise CheckFailed(_("with every count failing, pick_num_workers raised {kind}: {err}; expected "
                                "RuntimeError, saying that no count could be measured.").format(
                kind=type(err).__name__, err=err)) from None
    raise CheckFailed(_("with every count failing ({measurements}), pick_num_workers returned {got!r}; expected "
                        "RuntimeError: there is no count to pick, so say so.").format(
        measurements=measure.describe(), got=got))


# --------------------------------------------------------------------------- exercise 3: seed_numpy_worker


#: How :class:`DrawDataset` reports a worker whose ``dataset.rng`` is no longer a NumPy Generator.
NOT_A_GENERATOR = "dataset.rng is not a NumPy Generator: it is a "


class DrawDataset(Dataset):
    """Items ``(worker id, draw, error)``: a draw from ``self.rng``, a NumPy Generator made in ``__init__``.

    ``error`` is what the worker_init_fn raised in this worker ("" if nothing).
    """

    def __init__(self, n: int, seed: int) -> None:
        self.n = n
        self.rng = np.random.default_rng(seed)
        self.init_error = ""

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[int, float, str]:
        info = get_worker_info()
        if self.init_error:
            return (-1 if info is None else info.id, 0.0, self.init_error)
        if not isinstance(self.rng, np.random.Generator):
            return (-1 if info is None else info.id, 0.0, f"{NOT_A_GENERATOR}{type(self.rng).__name__}"
                    f"{f' ({self.rng!r})' if self.rng is None else ''}")
        return (-1 if info is None else info.id, float(self.rng.random()), "")


class Guarded:
    """Runs the learner's worker_init_fn and keeps what it raised in the dataset, for the check to report.

    A worker_init_fn that raises makes torch re-raise in the main process and
    then wait 5 s per worker to shut them down; kept here, the loader ends at
    once and the message stays one sentence.
    """

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __call__(self, worker_id: int) -> None:
        try:
            self.fn(worker_id)
        except Exception as err:  # noqa: BLE001 - reported by the check in the main process
            info = get_worker_info()
            if info is not None:
                info.dataset.init_error = f"{type(err).__name__}: {err}".strip()


def _resolve(module: str, qualname: str) -> Any:
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _importable(obj: Any) -> bool:
    """Can a spawned process find ``obj`` by its module and name, as pickle does?"""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "")
    if not module or module == "__main__" or "<" in qualname:
        return False
    try:
        return _resolve(module, qualname) is obj
    except (ImportError, AttributeError):
        return False


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _refuse_course_version(fn: Any, exercise: str = "seed_numpy_worker") -> None:
    """Fail at once when ``fn`` is, or reads, the course's own version of the exercise.

    Under spawn the tripwire of :mod:`helpers.checks.delegation` cannot reach
    a worker (it imports a fresh copy of helpers), so look before starting one.
    """
    from helpers.checks.delegation import COURSE_VERSIONS, _resolve as resolve_spec, message

    for spec, when in COURSE_VERSIONS.get(exercise, {}).items():
        course = resolve_spec(spec)
        reads = getattr(fn, "__globals__", {})
        names = _names(fn.__code__) if isinstance(fn, types.FunctionType) else set()
        module, _sep, qualname = spec.partition(":")
        imports_it = qualname in names and (module in names or any(
            isinstance(reads.get(name), types.ModuleType) and reads[name].__name__ == module for name in names))
        if fn is course or imports_it or any(reads.get(name) is course for name in names):
            raise CheckFailed(message(spec, when))


def _for_spawn(fn: Any) -> Any:
    """What the check hands to a spawn loader: ``fn`` itself if importable, else ``fn`` pickled by value.

    A lambda or a nested function is refused although cloudpickle could send
    it: the point is for code that works from a module too, where
    DataLoader's pickle sends a function by its name.
    """
    name = getattr(fn, "__name__", repr(fn))
    is_lambda = name == "<lambda>"
    what = _("the worker_init_fn is a lambda: {why}") if is_lambda else \
        _("the worker_init_fn is a nested function: {why}")
    check(not is_lambda and "<locals>" not in getattr(fn, "__qualname__", ""),
          what.format(why=_("under spawn (macOS, Windows) DataLoader pickles worker_init_fn to send it to each "
                            "worker, and pickle finds a function by its name in its module, which a lambda or a "
                            "function inside another function does not have; its workers never start. Write it with "
                            "def at the top level of a cell (course code: of a module).")))
    if _importable(fn):
        return fn
    try:
        sent = portable(fn)
    except PortableError as err:
        raise CheckFailed(_("Under spawn each worker gets a copy of `{name}` and of what it reads: {err}").format(
            name=name, err=err)) from None
    print(_("note: `{name}` is defined in the notebook. Under spawn a function defined in a notebook cannot be sent to "
            "workers by name (the worker imports modules, it never runs the notebook); that is why course code puts it "
            "in a module (helpers.dataloader.seed_worker). This check sent it by value instead (its code and what it "
            "reads, with cloudpickle); no points are lost for that.").format(name=name))
    return sent


class _WorkerInitFailed(Exception):
    """What the learner's worker_init_fn raised in a worker (its type and message)."""


def _draws(fn: Any, start_method: str, seed: int, n: int, data_seed: int, epochs: int) -> list[dict[int, list]]:
    """Per epoch, each worker's draws from a real 2-worker loader seeded with ``seed``."""
    loader = DataLoader(DrawDataset(n, data_seed), batch_size=None, num_workers=2, worker_init_fn=Guarded(fn),
                        generator=torch.Generator().manual_seed(seed), multiprocessing_context=start_method,
                        timeout=60 * busy_factor())
    result = []
    for _epoch in range(epochs):
        per_worker: dict[int, list] = {}
        for worker, draw, error in loader:
            if error:
                raise _WorkerInitFailed(error)
            per_worker.setdefault(int(worker), []).append(float(draw))
        result.append(per_worker)
    return result


def _run(fn: Any, start_method: str, seed: int, n: int, data_seed: int, epochs: int) -> list[dict[int, list]]:
    """:func:`_draws`, with what a worker raised told in one sentence, and no worker left behind."""
    failure = None
    try:
        with warnings_dropped(), forbid_course_versions("seed_numpy_worker"):
            return _draws(fn, start_method, seed, n, data_seed, epochs)
    except Exception as err:  # noqa: BLE001 - what the worker raised is the learner's mistake to report
        failure = (type(err), str(err).strip())
    # torch's re-raised worker error holds the loader's iterator in a reference cycle (through its traceback);
    # collect it now, so its workers end with this check rather than at some later collection
    gc.collect()
    kind, text = failure
    if "write it yourself" in text:
        raise CheckFailed(text[text.index("write it yourself"):].splitlines()[0])
    if issubclass(kind, CheckFailed):
        raise CheckFailed(text)
    if kind is _WorkerInitFailed and text == "NotImplementedError:":
        raise CheckFailed(_("`{name}` is not written yet: replace `raise NotImplementedError()` in its cell with "
                            "your code, run that cell, then run this check again.").format(name="seed_numpy_worker"))
    if kind is _WorkerInitFailed and text.startswith(NOT_A_GENERATOR):  # the worker's report, in English: its rest
        raise CheckFailed(_("in a 2-worker loader ({start_method}), after seed_numpy_worker ran, the worker's "
                            "dataset.rng is not a NumPy Generator: it is a {kind}. The dataset draws with "
                            "dataset.rng.random(), so rng must be a NumPy Generator: set get_worker_info().dataset.rng "
                            "= np.random.default_rng(get_worker_info().seed) (np.random.seed returns None and seeds "
                            "only the global generator).").format(start_method=start_method,
                                                                  kind=text[len(NOT_A_GENERATOR):]))
    if kind is _WorkerInitFailed:
        raise CheckFailed(_("in a 2-worker loader ({start_method}), seed_numpy_worker raised {error}").format(
            start_method=start_method, error=text))
    last = text.splitlines()[-1] if text else ""  # torch re-raises a worker's error with its traceback as text
    shown = last if last.startswith(kind.__name__) else f"{kind.__name__}: {last}"
    raise CheckFailed(_("a 2-worker loader ({start_method}) with worker_init_fn=seed_numpy_worker failed: "
                        "{error}").format(start_method=start_method, error=shown))


def _check_distinct(draws: dict[int, list], start_method: str) -> None:
    w0, w1 = draws.get(0, []), draws.get(1, [])
    check(w0 and w1 and w0[:2] != w1[:2], _("under {start_method}, worker 0 drew {first} and worker 1 drew {second}: "
                                            "the same \"random\" numbers in every worker. Each worker got a copy of "
                                            "the dataset's Generator in the same state (the cloned Generator); give "
                                            "the copy in each worker its own: "
                                            "dataset.rng = np.random.default_rng(get_worker_info().seed).").format(
        start_method=start_method, first=w0[:3], second=w1[:3]))


def check_worker_init(fn: Any, start_method: str = "fork", seed: int = 0, n: int = 8, data_seed: int = 0,
                      other_seed: int | None = None) -> None:
    """A real 2-worker loader: workers draw differently, epochs differ, and the loader's seed repeats the draws.

    Under spawn one epoch is run (spawned workers start slowly), and what spawn's workers did is reported.
    A quick fork run comes first only to catch the course's own version reached through a module (a spawned
    worker imports a fresh copy of helpers, which the tripwire cannot reach); any other fork result is left
    for the fork check to report.
    """
    _refuse_course_version(fn)
    if start_method == "spawn":
        handed = _for_spawn(fn)
        try:
            _run(fn, "fork", seed, n, data_seed, 1)
        except CheckFailed as err:
            if "write it yourself" in str(err):
                raise
        _check_distinct(_run(handed, "spawn", seed, n, data_seed, 1)[0], "spawn")
        return
    first = _run(fn, start_method, seed, n, data_seed, 2)
    _check_distinct(first[0], start_method)
    check(first[0][0] != first[1][0], _("epoch 1 repeated epoch 0's draws in worker 0 ({draws}): seed from "
                                        "get_worker_info().seed, which changes every epoch, not from the worker id "
                                        "alone.").format(draws=first[0][0][:3]))
    again = _run(fn, start_method, seed, n, data_seed, 1)
    check(again[0] == first[0], _("two loaders with the same generator seed drew different numbers: the draws are not "
                                  "reproducible. Seed from get_worker_info().seed (derived from the loader's "
                                  "generator), not from the clock, the process id or fresh OS entropy."))
    if other_seed is not None:
        other = _run(fn, start_method, other_seed, n, data_seed, 1)
        check(other[0] != first[0], _("loaders seeded {seed} and {other_seed} drew the same numbers: the loader's seed "
                                      "is ignored. Seed from get_worker_info().seed.").format(seed=seed,
                                                                                            other_seed=other_seed))
