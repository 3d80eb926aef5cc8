"""What grade cells use, kept apart from the modules the chapters teach with.

Floors: ``failure`` (CheckFailed), ``patching`` (the one patching utility)
and ``fakes`` (the one fake machine, and the stand-ins built on it) at the
bottom; ``delegation`` (no exercise passed by calling the course's own
version) and ``display`` (how a failed check looks in a notebook: IPython's
``set_custom_exc``, installed by ``core``) on them; ``core`` (the check_*
assertions, solved, passed); then one
module of verdicts per chapter, ``chNN``. No teaching module imports anything
from here.

A grade cell imports what it uses inside the cell (``from helpers.checks
import check, passed``), so a learner's cell that defines its own ``check``
changes nothing the grader runs; ``tr`` (helpers.i18n's) is here for the
English labels a cell hands a check (``tr("a model whose first layer is
frozen")``), which the Korean edition shows in Korean. Hidden test *cases*
never live here: the installed package is public to every learner; they stay
in the cells' hidden blocks, and the chapter modules hold only the verdict
logic.
"""

from helpers.checks.core import (
    CheckFailed,
    check,
    check_close,
    check_dtype,
    check_equal,
    check_raises,
    check_type,
    passed,
    solved,
    solved_or,
)
from helpers.checks.fakes import FakeMachine, cpu_only_machine, fake_machine
from helpers.checks.patching import CallLog, patched, record_calls
from helpers.i18n import tr

__all__ = [
    "CallLog",
    "CheckFailed",
    "FakeMachine",
    "check",
    "check_close",
    "check_dtype",
    "check_equal",
    "check_raises",
    "check_type",
    "cpu_only_machine",
    "fake_machine",
    "passed",
    "patched",
    "record_calls",
    "solved",
    "solved_or",
    "tr",
]
