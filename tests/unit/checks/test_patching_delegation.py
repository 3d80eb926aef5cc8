"""The shared machinery of helpers.checks: the one patching utility and the tripwire for the course's
own versions of an exercise. (Assertions and the fake machine: tests/unit/checks/test_core.py.)"""

import functools
import time

import pytest

from helpers import device as dev
from helpers.checks import CheckFailed, patched, solved
from helpers.checks.delegation import COURSE_VERSIONS, CourseVersionCalled, forbid_course_versions


def test_patched_restores_attributes_and_learner_bindings_even_after_an_error():
    original = time.perf_counter
    learner = {"perf_counter": time.perf_counter, "other": 1}
    with pytest.raises(ZeroDivisionError):
        with patched([(time, "perf_counter", lambda: 42.0)], [learner]):
            assert time.perf_counter() == 42.0 and learner["perf_counter"]() == 42.0
            learner["added_meanwhile"] = "kept"
            1 / 0
    assert time.perf_counter is original and learner["perf_counter"] is original
    assert learner["added_meanwhile"] == "kept" and learner["other"] == 1


def test_patched_skips_attributes_the_owner_lacks_and_a_later_change_wins():
    with patched([(time, "no_such_clock", 1), (time, "monotonic", lambda: 1.0), (time, "monotonic", lambda: 2.0)]):
        assert not hasattr(time, "no_such_clock") and time.monotonic() == 2.0
    assert time.monotonic() != 2.0


def move_batch(batch, device):
    return dev.to_device(batch, device)


def move_batch_aliased(batch, device):
    mover = functools.partial(dev.to_device, device=device)
    return mover(batch)


def move_batch_swallowing(batch, device):
    try:
        return dev.to_device(batch, device)
    except Exception:  # noqa: BLE001 - the learner hides the tripwire; it must still count
        return batch


@pytest.mark.parametrize("fn", [move_batch, move_batch_aliased, move_batch_swallowing], ids=lambda f: f.__name__)
def test_calling_the_course_version_fails_however_it_is_reached(fn):
    fn.__name__ = "move_batch"
    with pytest.raises(CourseVersionCalled, match=r"write it yourself: `helpers\.device\.to_device`"):
        solved(fn, [1], "cpu")
    assert dev.to_device([1], "cpu") == [1], "the course function works again afterwards"


def test_the_tripwire_is_only_for_the_exercise_it_is_listed_under():
    def count_parameters(model):
        return len(dev.to_device([1, 2], "cpu"))

    assert solved(count_parameters, None) == 2
    with forbid_course_versions("no_such_exercise"):
        assert dev.to_device([3], "cpu") == [3]


def test_every_listed_course_version_exists_and_is_a_plain_function():
    from helpers.checks.delegation import _resolve

    for exercise, targets in COURSE_VERSIONS.items():
        for spec in targets:
            fn = _resolve(spec)
            assert callable(fn), (exercise, spec)


LEARNER_CELLS = {
    "a from import": "from helpers.device import to_device\ndef move_batch(batch, device):\n    return to_device(batch, device)\n",
    "an alias": "from helpers import device\nmover = device.to_device\ndef move_batch(batch, device):\n    return mover(batch, device)\n",
}


@pytest.mark.parametrize("cell", LEARNER_CELLS.values(), ids=LEARNER_CELLS.keys())
def test_a_learners_own_binding_of_the_course_version_trips_and_is_put_back(cell):
    """The learner's globals are rebound to the tripwire through the patching utility, then restored."""
    learner: dict = {}
    exec(compile(cell, "<learner cell>", "exec"), learner)
    bound = {name: value for name, value in learner.items() if name != "__builtins__"}
    with pytest.raises(CourseVersionCalled, match=r"`helpers\.device\.to_device`"):
        solved(learner["move_batch"], [1], "cpu")
    assert {name: learner[name] for name in bound} == bound, "every binding is put back"
    assert learner["move_batch"]([1], "cpu") == [1]


def test_no_function_has_its_code_swapped():
    """Delegation goes through the one patching utility: nothing in either package assigns a ``__code__``, but the
    referee relabelling the learner's own definitions as they load (``referee.arm``'s ``loaded``: a definition
    that claims a file of torch's or the course's is renamed ``<learner: ...>``; it changes no behaviour)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    swaps = [f"{path.relative_to(root)}:{node.lineno}" for pkg in ("helpers", "course_tools")
             for path in (root / pkg).rglob("*.py") for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
             for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
             if isinstance(target, ast.Attribute) and target.attr == "__code__"]
    relabel = [s for s in swaps if s.startswith("course_tools/grading/engine/referee.py:")]
    assert len(relabel) == 1 and swaps == relabel, swaps


def test_a_course_version_failure_is_a_check_failure():
    assert issubclass(CourseVersionCalled, CheckFailed)


def test_a_learners_own_error_is_not_explained_as_a_device_mix_up():
    def choose_device(requested=None):
        raise RuntimeError("No CUDA GPUs are available")  # the learner's own, correct, message

    with pytest.raises(RuntimeError, match="No CUDA GPUs are available") as info:
        solved(choose_device, "cuda")
    assert not isinstance(info.value, CheckFailed)


def test_a_device_mix_up_torch_reports_is_explained():
    import torch

    def forward(x):
        return torch.nn.Linear(2, 2)(x.to("meta"))  # weights on the CPU, input on another device

    with pytest.raises(CheckFailed, match="This means"):
        solved(forward, torch.ones(1, 2))


def test_warnings_and_log_records_become_notes_on_stdout(capsys):
    import logging
    import warnings

    def count_parameters(model):
        warnings.warn("Converting a tensor with requires_grad=True to a scalar", UserWarning)
        logging.getLogger("learner").warning("searching")
        return 3

    assert solved(count_parameters, None) == 3
    out, err = capsys.readouterr()
    assert err == "" and "costs no points" in out and "requires_grad" in out and "searching" in out


def test_a_warning_filter_set_to_error_still_raises():
    import warnings

    def step():
        warnings.warn("old API", FutureWarning)

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        with pytest.raises(FutureWarning):
            solved(step)


def test_a_checks_own_warnings_are_dropped_and_the_learners_still_become_notes(capsys):
    import warnings

    from helpers.checks.core import warnings_dropped

    def step():
        warnings.warn("learner's", UserWarning)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with warnings_dropped():
            warnings.warn("the check's own", UserWarning)  # neither raised nor printed
            solved(step)
    out, err = capsys.readouterr()
    assert err == "" and "learner's" in out and "the check's own" not in out


def test_solved_or_falls_back_to_the_course_version_only_when_the_exercise_is_not_usable(capsys):
    from helpers.checks import solved_or

    def course(x):
        return ("course", x)

    def stub(x):
        raise NotImplementedError()

    def written(x):
        return ("yours", x)

    def broken(x):
        raise ValueError("bad x")

    assert solved_or(course, written, 1) == ("yours", 1)
    assert capsys.readouterr().out == ""
    assert solved_or(course, stub, 2) == ("course", 2)
    out = capsys.readouterr().out
    assert "`stub` is not written yet" in out and "course's version" in out and "course" in out
    assert solved_or(course, broken, 3) == ("course", 3)
    assert "`broken` raised ValueError: bad x" in capsys.readouterr().out


def test_what_the_learner_writes_to_stderr_becomes_a_note_on_stdout(capsys):
    """nbgrader scores 0 for a grade cell with stderr: print(file=sys.stderr) and a named logger with its own
    handler (made before the call, so it holds the real stderr) cost nothing and are still shown."""
    import logging
    import sys

    from helpers.checks import solved

    logger = logging.getLogger("course-test-learner")
    logger.addHandler(logging.StreamHandler(sys.stderr))
    logger.propagate = False

    def answer():
        print("skipped 4: OSError", file=sys.stderr)
        logger.warning("skipped 8: RuntimeError")
        return 1

    try:
        assert solved(answer) == 1
    finally:
        logger.handlers.clear()
    captured = capsys.readouterr()
    assert captured.err == ""
    assert "skipped 4: OSError" in captured.out and "skipped 8: RuntimeError" in captured.out
    assert "costs no points" in captured.out


class _AlwaysEqual(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class _Agreeable:
    def __eq__(self, other):
        return True


@pytest.mark.parametrize("answer", [_AlwaysEqual(0), [1, {"n": _AlwaysEqual(2)}], _Agreeable(), (_Agreeable(),)],
                         ids=["int-subclass", "nested", "any-object", "in-a-tuple"])
def test_an_answer_that_judges_comparisons_itself_fails_and_says_why(answer):
    with pytest.raises(CheckFailed, match="defines __eq__.*answer a check's comparison for itself"):
        solved(lambda: answer)


def test_plain_answers_pass_through_solved_unchanged():
    import collections

    import torch

    Pair = collections.namedtuple("Pair", "inputs target")  # a learner's own named tuple defines no comparison
    for answer in [3, 2.5, "cuda:0", None, torch.ones(2), torch.nn.Parameter(torch.ones(1)), torch.nn.Linear(2, 2),
                   Pair(torch.ones(1), [1, 2]), {"x": [torch.zeros(1)]}, torch.max(torch.ones(3), 0)]:
        assert solved(lambda: answer) is answer


def test_a_stand_in_the_learner_replaces_while_the_check_watches_fails_the_check_and_is_put_back():
    import torch

    from helpers.checks import record_calls

    original = torch.cuda.synchronize
    with pytest.raises(CheckFailed, match="replaced torch.cuda.synchronize"):
        with record_calls({"sync": (torch.cuda, "synchronize")}):
            torch.cuda.synchronize = lambda *a: None  # calls would go unseen
    assert torch.cuda.synchronize is original
    with record_calls({"sync": (torch.cuda, "synchronize")}) as log:  # honest: the spy stays, nothing fails
        torch.cuda.synchronize
    assert log.count("sync") == 0
