"""No exercise is passed by calling the course's own implementation of it.

The course's helpers implement most techniques a chapter asks a learner to
write (``helpers.device.to_device`` *is* a nested-batch mover). Using them is
right from the chapter after; inside the exercise it earns nothing. While a
check calls a learner's function (through :func:`helpers.checks.solved`), the
course functions listed for that exercise in :data:`COURSE_VERSIONS` are
replaced by a tripwire, however the learner reached them (a module
attribute, a ``from`` import, an alias, a partial): the function's code object
is swapped, so every reference to it trips. Delegating to torch or the
standard library is fine and is never listed here.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

from helpers.checks.core import CheckFailed

__all__ = ["COURSE_VERSIONS", "CourseVersionCalled", "forbid_course_versions"]

# exercise function (as the task names it) -> {"module:qualname" of a course function: when the course uses it}
COURSE_VERSIONS: dict[str, dict[str, str]] = {
    # chapter 02. forward_on has no course version: to_device moves its input (fine), nothing does the rest
    "choose_device": {"helpers.device:pick_device": "every chapter's opening cell uses it; use it yourself from chapter 03 on",
                      "helpers.device:available_devices": "the inventory behind pick_device",
                      "helpers.device:accelerator": "pick_device's automatic choice"},
    "move_batch": {"helpers.device:to_device": "used from chapter 03 on"},
    "time_on_device": {"helpers.benchmark:time_callable": "chapter 01's sweeps use it, and every chapter from 03 on",
                       "helpers.benchmark:sync_timer": "the synchronising clock inside bench.time_callable"},
    "compare_devices": {"helpers.benchmark:sweep": "chapter 01's sweep over sizes and devices",
                        "helpers.benchmark:crossover": "chapter 01's sweep reads its crossover with it"},
    "training_memory": {"helpers.memory:estimate_anatomy": "chapter 03 measures with it in section 3"},
    "amp_train_step": {"helpers.amp:scaled_step": "chapter 05 names it in section 6, for use after the exercises"},
    "amp_clip_step": {"helpers.amp:scaled_step": "with max_norm; chapter 05 names it in section 6, for use after "
                                                 "the exercises"},
    "diagnose": {"helpers.troubleshoot:explain_error": "chapter 07's own diagnosis, shown above the exercise"},
    "profile_regions": {"helpers.troubleshoot:profile_regions": "chapter 07's own version",
                        "helpers.troubleshoot:region_totals": "chapter 07's trace reader, used in section 5",
                        "helpers.troubleshoot:slowest_region": "chapter 07's trace reader, used in section 5"},
    "loader_for": {"helpers.dataloader:make_loader": "used in chapter 04 after this exercise"},
    "seed_numpy_worker": {"helpers.dataloader:seed_worker": "used in chapter 04 after this exercise"},
    "train_ddp": {"helpers.ddp:train": "chapter 06's DDP loop, timed in its section 5"},
}


class CourseVersionCalled(CheckFailed):
    """The learner's function called the course's own implementation of the exercise."""


_tripped: list[str] = []
_active: dict[str, tuple[str, str]] = {}  # code name -> (target, when)


def _tripwire(*args: Any, **kwargs: Any) -> Any:
    import helpers.checks.delegation as here  # resolved in the swapped function's own globals

    raise here.tripped()


def tripped() -> CourseVersionCalled:
    """Record that a listed course function was called, and build the error it raises."""
    import sys

    code = sys._getframe(1).f_code  # the swapped function's frame: its name is the target's
    target, when = _active.get(code.co_qualname if hasattr(code, "co_qualname") else code.co_name,
                               ("a course helper", ""))
    _tripped.append(target)
    return CourseVersionCalled(message(target, when))


def message(target: str, when: str) -> str:
    name = target.replace(":", ".")
    return (f"write it yourself: `{name}` is the course's own version of this exercise ({when}), so calling it "
            f"earns nothing here. Use torch and the standard library; the task says what to do step by step.")


def _resolve(spec: str) -> Any:
    module_name, _, qualname = spec.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return getattr(obj, "__func__", obj)


@contextlib.contextmanager
def forbid_course_versions(exercise: str) -> Iterator[None]:
    """While the block runs, calling a course version of ``exercise`` raises :class:`CourseVersionCalled`.

    On exit, a call that the learner's code caught and hid (``except Exception``)
    is raised all the same: swallowing the tripwire does not pass.
    """
    swapped: list[tuple[Any, Any]] = []
    start = len(_tripped)
    try:
        for spec, when in COURSE_VERSIONS.get(exercise, {}).items():
            fn = _resolve(spec)
            code = getattr(fn, "__code__", None)
            if code is None or code.co_freevars:
                continue  # not a plain function; nothing to swap safely
            wire = _tripwire.__code__.replace(co_name=code.co_name,
                                              **({"co_qualname": code.co_qualname} if hasattr(code, "co_qualname") else {}))
            _active[getattr(code, "co_qualname", code.co_name)] = (spec, when)
            swapped.append((fn, code))
            fn.__code__ = wire
        yield
    finally:
        for fn, code in swapped:
            fn.__code__ = code
        _active.clear()
        if len(_tripped) > start:  # raised from finally: it replaces whatever the learner raised instead
            target = _tripped[start]
            del _tripped[start:]
            raise CourseVersionCalled(message(target, COURSE_VERSIONS.get(exercise, {}).get(target, ""))) from None
