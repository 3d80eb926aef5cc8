"""The referee (course_tools/grading/engine/referee.py): tampering from inside a checked function is refused or found.

Each case is a learner's definition, handed to a real verdict worker as grading hands it (cloudpickle, by value),
and a grade cell that calls it the way a check does. The tampering cases must end in the report's ``tampered``
list (the cell scores 0); the honest ones, which use the same doors for ordinary reasons (logging, a named tuple,
formatting an exception, a decorated function), must leave it empty.
"""

from __future__ import annotations

import sys

import cloudpickle
import pytest

from course_tools.grading.engine import referee
from course_tools.grading.engine.apart_worker import VerdictWorker


@pytest.fixture(scope="module")
def worker():
    w = VerdictWorker(sandbox=False, course_root="/tmp").start()
    yield w
    w.close()


def _define(source: str, name: str):
    """A learner's function as the kernel would hand it over: defined in a cell (a file outside the grader's)."""
    namespace: dict = {"__name__": "__main__"}
    exec(compile(source, "/tmp/ipykernel_0/cell.py", "exec"), namespace)
    return namespace[name]


def _judge(worker, source: str, cell: str, name: str = "answer") -> dict:
    blob = cloudpickle.dumps({name: _define(source, name)})
    report = worker.judge(cell, blob, cap=100_000)
    assert report["result"] is not None, report
    return report["result"]


CHECK = ("from helpers.checks import check_equal, solved\nwant = 42\n"
         "check_equal(solved(answer, 1), want, 'answer(1)')\n")

TAMPERING = {
    "code_swap": """def answer(x):
    import helpers.checks.core as core
    core.check_equal.__code__ = (lambda *a, **k: None).__code__
    return 0
""",
    "frame_read": """import sys
def answer(x):
    frame = sys._getframe(1)
    while frame is not None and 'want' not in frame.f_globals:
        frame = frame.f_back
    return frame.f_globals['want'] if frame is not None else 0
""",
    "inspect_stack": """import inspect
def answer(x):
    for info in inspect.stack():
        if 'want' in info.frame.f_globals:
            return info.frame.f_globals['want']
    return 0
""",
    "traceback_frame": """def answer(x):
    try:
        raise ValueError
    except ValueError as err:
        frame = err.__traceback__.tb_frame.f_back
    while frame is not None and 'want' not in frame.f_globals:
        frame = frame.f_back
    return frame.f_globals['want'] if frame is not None else 0
""",
    "gc_search": """import gc
def answer(x):
    for obj in gc.get_objects():
        if isinstance(obj, dict) and obj.get('want') == 42:
            return obj['want']
    return 0
""",
    "closure_swap": """def answer(x):
    import helpers.checks.core as core
    for cell in core.solved.__closure__ or ():
        pass
    import helpers.checks.patching as p
    p._still_installed.__defaults__ = ()
    return 0
""",
    "audit_hook": """import sys
def answer(x):
    sys.addaudithook(lambda *a: None)
    return 0
""",
    "disguised_code": """import torch
def answer(x):
    namespace = {}
    exec(compile('def f():\\n    return 42\\n', torch.optim.__file__, 'exec'), namespace)
    return namespace['f']()
""",
    "forged_report": """import os
def answer(x):
    for fd in range(3, 64):
        try:
            os.write(fd, bytes(8) + bytes(32))
        except OSError:
            pass
    return 42
""",
    "thread_frames": """import sys
def answer(x):
    for frame in sys._current_frames().values():
        while frame is not None and 'want' not in frame.f_globals:
            frame = frame.f_back
        if frame is not None:
            return frame.f_globals['want']
    return 0
""",
}

#: A constant a verdict reads, changed from inside the function: the guard watches those too.
SETTINGS = {
    "raised_cap": """def answer(x):
    import helpers.checks.ch08 as ch08
    ch08.MAX_SYNCS = 10 ** 9  # the cap on host reads, raised
    return 42
""",
    "bookkeeping_path": """def answer(x):
    import helpers.speed as speed
    speed._TORCH_CPU_BOOKKEEPING = '/'  # every frame reads as torch's own bookkeeping: nothing counted
    return 42
""",
    "course_versions_emptied": """def answer(x):
    from helpers.checks.delegation import COURSE_VERSIONS
    COURSE_VERSIONS['compile_pays'].clear()
    COURSE_VERSIONS.pop('train_quietly')
    return 42
""",
}


@pytest.mark.parametrize("case", sorted(TAMPERING | SETTINGS))
def test_tampering_from_inside_a_checked_function_is_refused_or_found(worker, case):
    result = _judge(worker, {**TAMPERING, **SETTINGS}[case], CHECK)
    assert result["tampered"], (case, result)


def test_a_code_swap_while_the_definitions_load_is_refused(worker):
    class Trojan:
        def __reduce__(self):
            return (eval, ("(setattr(__import__('helpers.checks.core', fromlist=['core']).check_equal, '__code__', "
                           "(lambda *a, **k: None).__code__), lambda x: 0)[1]",))

    report = worker.judge(CHECK, cloudpickle.dumps({"answer": Trojan()}), cap=100_000)
    assert report["result"] is None or report["result"]["tampered"] or report["result"]["error"], report


HONEST = {
    "logging": """import logging
def answer(x):
    logging.getLogger('mine').info('working on %s', x)
    return 42
""",
    "named_tuple": """import collections
def answer(x):
    Pair = collections.namedtuple('Pair', 'a b')
    return Pair(40, 2).a + 2
""",
    "format_exception": """import traceback
def answer(x):
    try:
        raise ValueError('boom')
    except ValueError as err:
        text = ''.join(traceback.format_exception(err))
    return 42 if 'boom' in text else 0
""",
    "no_grad": """import torch
@torch.no_grad()
def answer(x):
    return int(torch.tensor(41) + x)
""",
    "generator": """def answer(x):
    def numbers():
        yield 40
        yield 2
    return sum(numbers())
""",
}


@pytest.mark.parametrize("case", sorted(HONEST))
def test_honest_answers_that_use_the_same_doors_are_left_alone(worker, case):
    result = _judge(worker, HONEST[case], CHECK)
    assert result == {"error": None, "tampered": []}, (case, result)


STASHED = """import helpers.device
def choose_device(prefer=None, _course=helpers.device.pick_device):
    return _course()
"""
VERSION_CHECK = ("from helpers.checks import solved\n"
                 "solved(choose_device)\n")


def test_the_course_version_is_refused_however_the_learner_reached_it(worker):
    """A default argument holds pick_device: no binding the tripwire rebinds, and still refused."""
    result = _judge(worker, STASHED, VERSION_CHECK, name="choose_device")
    assert result["error"] is not None and "CourseVersionCalled" in result["error"]["ename"], result
    assert any("pick_device" in t for t in result["tampered"]), result


def test_a_swallowed_course_version_call_still_counts(worker):
    swallowed = STASHED.replace("    return _course()\n", "    try:\n        _course()\n    except Exception:\n"
                                                       "        pass\n    import torch\n    return torch.device('cpu')\n")
    result = _judge(worker, swallowed, VERSION_CHECK, name="choose_device")
    assert any("pick_device" in t for t in result["tampered"]), result


def test_the_check_itself_may_call_what_it_refuses_the_learner(worker):
    cell = ("from helpers.checks import solved\nimport helpers.device\n"
            "solved(choose_device)\nprint(helpers.device.pick_device())\n")
    result = _judge(worker, "import torch\ndef choose_device():\n    return torch.device('cpu')\n", cell,
                    name="choose_device")
    assert result == {"error": None, "tampered": []}, result


def test_a_report_is_read_only_with_its_key():
    import hashlib
    import hmac

    key = b"k" * 32
    payload = repr({"error": None, "tampered": []}).encode()
    good = len(payload).to_bytes(8, "big") + hmac.new(key, payload, hashlib.sha256).digest() + payload
    assert referee.read_reports(good, key) == ({"error": None, "tampered": []}, False)
    forged = len(payload).to_bytes(8, "big") + bytes(32) + payload
    assert referee.read_reports(forged + good, key)[1] is True
    assert referee.read_reports(good + forged, key) == ({"error": None, "tampered": []}, True)


def test_learner_code_is_told_from_the_graders_by_where_it_lives():
    roots = referee.trusted_roots("/course")
    assert any(sys.prefix in r or "site-packages" in r for r in roots)
    assert "/course/helpers/" in roots and not any(r == "/course/" for r in roots)


def _exercises() -> set[str]:
    """The functions the learner writes: every ``def`` of a solution cell of every chapter."""
    import re

    import nbformat

    from support.layout import SOLUTIONS

    names = set()
    for path in sorted(SOLUTIONS.glob("*/*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
                names |= set(re.findall(r"^def (\w+)", cell.source, re.M))
    return names


def test_every_exercise_says_what_computes_its_answer():
    from helpers.checks.delegation import COURSE_VERSIONS

    missing = _exercises() - set(COURSE_VERSIONS)
    assert not missing, f"exercises with no entry in COURSE_VERSIONS (an empty one if nothing computes them): {missing}"


def test_every_course_version_announces_itself_to_the_referee():
    """The referee refuses a course version by the event its body raises: one without it is a plain function."""
    import inspect

    from helpers.checks.delegation import COURSE_VERSIONS, _resolve

    silent = []
    for spec in sorted({spec for notes in COURSE_VERSIONS.values() for spec in notes}):
        source = inspect.getsource(_resolve(spec))  # as the delegation resolves it: a class's method too
        if f'sys.audit("course.version", "{spec}")' not in source:
            silent.append(spec)
    assert not silent, f"course versions that do not announce themselves: {silent}"


def test_the_announcement_rule_can_fail(monkeypatch):
    from helpers.checks import delegation

    monkeypatch.setitem(delegation.COURSE_VERSIONS, "choose_device", {"helpers.device:synchronize": ""})
    with pytest.raises(AssertionError, match="helpers.device:synchronize"):
        test_every_course_version_announces_itself_to_the_referee()
def test_a_definition_that_claims_a_file_of_torch_is_still_the_learners(worker):
    """Code made in the notebook under torch's file name (so its frames look like torch's) is relabelled when it
    loads: its frame reading is refused, and the sync counter would not take its loop for torch's bookkeeping."""
    import torch

    namespace: dict = {"__name__": "__main__"}
    source = ("import sys\ndef answer(x):\n    frame = sys._getframe(1)\n    while frame is not None and 'want' not in "
              "frame.f_globals:\n        frame = frame.f_back\n    return frame.f_globals['want'] if frame else 0\n")
    exec(compile(source, torch.optim.__file__, "exec"), namespace)
    result = worker.judge(CHECK, cloudpickle.dumps({"answer": namespace["answer"]}), cap=100_000)["result"]
    assert any("sys._getframe" in t for t in result["tampered"]), result
    where = worker.judge("print(answer.__code__.co_filename)\n", cloudpickle.dumps({"answer": namespace["answer"]}),
                         cap=100_000)
    assert where["stdout"].startswith("<") and torch.__file__ not in where["stdout"], where  # cloudpickle's own
    # "<dynamic-code>", or the referee's "<learner: ...>" where a cloudpickle keeps the file name


def test_code_made_under_the_graders_names_while_loading_is_refused(worker):
    class Stash:
        def __reduce__(self):  # compiles a frame reader under torch's name while the grader loads, keeps it in builtins
            import torch

            return (eval, (f"__import__('builtins').__setattr__('peek', eval(compile('lambda: __import__(\"sys\")."
                           f"_getframe(2)', {torch.__file__!r}, 'eval'))) or (lambda x: 0)",))

    report = worker.judge(CHECK, cloudpickle.dumps({"answer": Stash()}), cap=100_000)
    assert report["result"]["tampered"], report


def test_relabelling_reaches_nested_code():
    import torch

    namespace: dict = {}
    exec(compile("def outer():\n    def inner():\n        return 1\n    return inner\n", torch.__file__, "exec"), namespace)
    code = referee._relabelled(namespace["outer"].__code__)
    inner = next(c for c in code.co_consts if hasattr(c, "co_filename"))
    assert code.co_filename == inner.co_filename == f"<learner: {torch.__file__}>"
    assert referee._relabelled(code).co_filename == code.co_filename  # once is enough
