"""No exercise is passed by calling the course's own implementation of it.

The course's helpers implement most techniques a chapter asks a learner to
write (``helpers.device.to_device`` *is* a nested-batch mover). Using them is
right from the chapter after; inside the exercise it earns nothing. While a
check calls a learner's function (through :func:`helpers.checks.solved`), the
course functions listed for that exercise in :data:`COURSE_VERSIONS` are
replaced by a tripwire through the one patching utility
(:func:`helpers.checks.patching.patched`): on their module, and wherever a name
is bound to them in a loaded ``helpers`` module or in the learner's globals (a
``from`` import, an alias). A call through the module attribute while the
learner's code runs (``dev.to_device``, a ``functools.partial`` made then)
trips too. Every binding is put back on exit. Delegating to torch or the
standard library is fine and is never listed here.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from helpers.checks.failure import CheckFailed
from helpers.checks.patching import Change, patched
from helpers.i18n import N_, _

__all__ = ["COURSE_VERSIONS", "CourseVersionCalled", "forbid_course_versions"]

# exercise function (as the task names it) -> {"module:qualname" of a course function: when the course uses it}
COURSE_VERSIONS: dict[str, dict[str, str]] = {
    # chapter 02. forward_on has no course version: to_device moves its input (fine), nothing does the rest
    "choose_device": {
        "helpers.device:pick_device": N_("every chapter's opening cell uses it; use it yourself from chapter 03 on"),
        "helpers.device:available_devices": N_("the inventory behind pick_device"),
        "helpers.device:accelerator": N_("pick_device's automatic choice")},
    "move_batch": {"helpers.device:to_device": N_("used from chapter 03 on")},
    "time_on_device": {
        "helpers.benchmark:time_callable": N_("chapter 01's sweeps use it, and every chapter from 03 on"),
        "helpers.benchmark:sync_timer": N_("the synchronising clock inside bench.time_callable")},
    "compare_devices": {"helpers.benchmark:sweep": N_("chapter 01's sweep over sizes and devices"),
                        "helpers.benchmark:crossover": N_("chapter 01's sweep reads its crossover with it")},
    "training_memory": {"helpers.memory:estimate_anatomy": N_("chapter 03 measures with it in section 3"),
                        "helpers.checks.ch03:_expected_bytes": N_("the check's own reference count")},
    "amp_train_step": {"helpers.amp:scaled_step": N_("chapter 05 names it in section 6, for use after the exercises")},
    "amp_clip_step": {"helpers.amp:scaled_step": N_("with max_norm; chapter 05 names it in section 6, for use after "
                                                    "the exercises")},
    "diagnose": {"helpers.troubleshoot:explain_error": N_("chapter 07's own diagnosis, shown above the exercise"),
                 "helpers.errors:diagnosis_of": N_("the table of rules behind explain_error")},
    "profile_regions": {"helpers.troubleshoot:profile_regions": N_("chapter 07's own version"),
                        "helpers.troubleshoot:region_totals": N_("chapter 07's trace reader, used in section 5"),
                        "helpers.troubleshoot:slowest_region": N_("chapter 07's trace reader, used in section 5")},
    "loader_for": {"helpers.dataloader:make_loader": N_("used in chapter 04 after this exercise")},
    "seed_numpy_worker": {"helpers.dataloader:seed_worker": N_("used in chapter 04 after this exercise")},
    "train_ddp": {"helpers.ddp:train": N_("chapter 06's DDP loop, timed in its section 5"),
                  "helpers.checks.ch06:reference_weights": N_("the check's own reference training")},
    # Every other exercise, with what computes its expected answer. A function of ``helpers.checks`` listed here
    # (or announcing itself: ``sys.audit("course.version", ...)``) is refused to the learner's code in every
    # exercise when the grader's referee listens (course_tools/grading/engine/referee.py). An empty entry: nothing in
    # the course computes that answer, and the exercise is listed so a test can tell "none" from "forgotten".
    "count_parameters": {},
    "forward_on": {},
    "max_batch_size": {},
    "accumulate_gradients": {"helpers.checks.ch03:big_batch_gradient": N_("the check's own reference gradient")},
    "pick_num_workers": {},
    "average_gradients": {},
    "train_epoch": {"helpers.checks.ch07:_reference_epoch": N_("the check's own reference epoch")},
    "evaluate": {},
    "train_quietly": {"helpers.checks.ch08:noisy_epoch": N_("the chapter's noisy loop, which the check compares "
                                                            "yours with")},
    "compile_pays": {"helpers.checks.ch08:expected_decision": N_("the check's own reference answer")},
    "matmul_intensity": {"helpers.checks.ch10:_Count.intensity": N_("the check's own reference count")},
    "bound": {"helpers.roofline:Roof.bound": N_("chapter 10's measured roof, built in section 1"),
              "helpers.checks.ch10:_verdict": N_("the check's own reference verdict")},
    # chapter 10's kernel: nothing in helpers computes a row softmax; the checks compare with torch.softmax and
    # refuse torch's arithmetic inside softmax_rows themselves (ch10.check_softmax)
    "softmax_kernel": {},
    "softmax_rows": {},
    "step_flops_utilisation": {
        "helpers.ladder:step_flops": N_("chapter 09's own count, used in section 1 after you have written yours"),
        "helpers.checks.ch09:reference_flops": N_("the check's own reference count")},
    "fast_step": {"helpers.ladder:train_steps": N_("the ladder's training loop, used in section 2"),
                  "helpers.checks.ch09:slow_reference": N_("the chapter's slow step, which the check compares yours "
                                                           "with")},
}


class CourseVersionCalled(CheckFailed):
    """The learner's function called the course's own implementation of the exercise."""


def message(target: str, when: str) -> str:
    """What the learner reads on calling ``target``; ``when`` (a note of :data:`COURSE_VERSIONS`) is translated here,
    in the language chosen by the time the check runs."""
    name = target.replace(":", ".")
    return _("write it yourself: `{name}` is the course's own version of this exercise ({when}), so calling it earns "
             "nothing here. Use torch and the standard library; the task says what to do step by step.").format(
        name=name, when=_(when) if when else when)  # _("") would be the catalog's header


def _owner(spec: str) -> tuple[Any, str]:
    """(the object that holds it, its attribute name) for "module:qualname" (a class's method too)."""
    module_name, _colon, qualname = spec.partition(":")
    *path, name = qualname.split(".")
    owner: Any = importlib.import_module(module_name)
    for part in path:
        owner = getattr(owner, part)
    return owner, name


def _resolve(spec: str) -> Any:
    owner, name = _owner(spec)
    obj = getattr(owner, name)
    return getattr(obj, "__func__", obj)


def _tripwire(spec: str, when: str, original: Any, tripped: list[str]) -> Any:
    """What a listed course function is while the check runs: a record of the call, then the error."""

    def tripwire(*args: Any, **kwargs: Any) -> Any:
        tripped.append(spec)
        sys.audit("course.version", spec)  # the grader's referee records the call where no list can be cleared
        raise CourseVersionCalled(message(spec, when))

    # the name and docs only: functools.wraps would also hand over the original, callable, as __wrapped__
    for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
        setattr(tripwire, attr, getattr(original, attr, None))
    return tripwire


def _course_namespaces() -> list[dict]:
    """The globals of every loaded ``helpers`` module: where one course module binds another's function."""
    return [vars(m) for name, m in list(sys.modules.items())
            if m is not None and (name == "helpers" or name.startswith("helpers."))]


@contextlib.contextmanager
def forbid_course_versions(exercise: str, namespaces: Iterable[dict] = ()) -> Iterator[None]:
    """While the block runs, calling a course version of ``exercise`` raises :class:`CourseVersionCalled`.

    ``namespaces``: the learner's globals, whose names bound to a listed function
    are rebound to its tripwire too (and put back). On exit, a call that the
    learner's code caught and hid (``except Exception``) is raised all the same:
    swallowing the tripwire does not pass.
    """
    tripped: list[str] = []
    listed = COURSE_VERSIONS.get(exercise, {})
    changes: list[Change] = []
    for spec, when in listed.items():
        owner, name = _owner(spec)
        changes.append((owner, name, _tripwire(spec, when, getattr(owner, name), tripped)))
    if not changes:
        yield
        return
    with patched(changes, [*namespaces, *_course_namespaces()]):
        try:
            yield
        finally:
            if tripped:  # raised from finally: it replaces whatever the learner raised instead
                raise CourseVersionCalled(message(tripped[0], listed.get(tripped[0], ""))) from None
