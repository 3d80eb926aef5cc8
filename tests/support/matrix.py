"""A tiny course and a matrix of submissions, each with the outcome INSTRUCTORS.md promises.

The course is built in a temporary folder by the tests (nothing here depends on
the chapters): one assignment ``01_tiny`` with two exercises, three points,
short limits (``LIMITS``), and a roster of the students below.

``square`` (1 point: ``square-check``) and ``total`` (2 points: ``total-check``).
Each grade cell has a visible check and a hidden one; the hidden ones carry the
marker ``HIDDEN_MARK`` in their source and in their assertion text, so a test
can prove neither reaches the feedback.

Every case is a function ``(released notebook) -> notebook | bytes`` that
makes the learner's file; ``OUTCOMES`` says what grading must report:

===================  ==========================================  ===========  ======
student              what the learner did                        status       score
===================  ==========================================  ===========  ======
solved               our solution                                graded       3
blank                handed in the released notebook unchanged   wrong        0
wrong                square is x*abs(x): passes the visible      wrong        2
                     check, fails the hidden one; total right
different            correct, written differently                graded       3
assert_true          blank, ``square-check`` rewritten to        tampered     0
                     ``assert True`` (restored and graded)
deleted_test         solved, ``total-check`` deleted (restored)  tampered     3
stripped_meta        solved, ``total-check``'s nbgrader          tampered     3
                     metadata removed (restored)
infinite_loop        ``while True: pass`` in ``square``          timed out    2
                     (cell interrupted; ``total`` still graded)
swallow_interrupt    a loop that catches KeyboardInterrupt       timed out    2
                     (that cell skipped, the rest graded)
loop_in_check        ``total`` computes forever when a check     timed out    1
                     calls it: stopped at its CPU budget, and
                     its message gives the reference's cost
hang_in_check        ``total`` ignores the interrupt when a      timed out    1
                     check calls it (that check skipped)
killed_in_check      ``square`` SIGKILLs its kernel when a       crashed      2
                     check calls it (that check skipped)
memory_bomb          allocates until it fails; held by the       crashed      2
                     memory cap (MemoryError), rest graded
memory_spread        four child processes of 400 MiB each: each   crashed      2
                     under the 1024 MiB cap, together past it;
                     stopped by the submission's cap, rest graded
output_flood         prints ~20 MB in 10 million short lines,     graded       3
                     then solves; held by the output cap
dies                 ``os._exit(1)`` in ``square``: the kernel   crashed      2
                     dies (that cell skipped, the rest graded)
snoop                solved, and first tries to read the         graded       3
                     solutions, gradebook, outcomes, feedback,
                     another submission, to write beside them,
                     and to reach the network: all refused
rot13_leak           solved, but ``square`` tries to print the   tampered     2
                     check's source rot13-encoded (refused;
                     feedback shows none of its output)
long_message         ``total`` raises an error with a 5000-char  wrong        1
                     message (feedback shows it cut)
patch_checks,        square wrong (0), total right, plus a trick  wrong or   2
stand_in_module,     that used to pass square-check when checks  tampered
silenced_traceback,  ran in the kernel (``TAMPERING``; issue 24);  or crashed
always_equal,        ``trojan`` patches the check where the
patch_in_call,       definitions are loaded; ``exit_success``
trojan, exit_success ends that process with code 0;
code_swap, frame_read,  issue 33: a check's ``__code__`` swapped, the
gc_snapshot,            check's frames read, the guard's snapshot
forged_report,          emptied through gc, a report written to the
stashed_reference,      child's pipe, a check's reference kept in a
raised_cap              default argument, a verdict's constant raised:
                        each refused or found (tampered)
all_stripped         nbgrader metadata removed from every cell   unreadable   none
                     (work copied into a new notebook)
bad_json             not JSON at all                             unreadable   none
unknown_student      a student not on the roster                 unknown      none
===================  ==========================================  ===========  ======

Plus one submission for an assignment the course does not have
(``solved`` hands in ``99_ghost``): status ``unknown``, no score.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ASSIGNMENT = "01_tiny"
GHOST_ASSIGNMENT = "99_ghost"
HIDDEN_MARK = "HIDDEN-SECRET"
MAX_SCORE = 3.0

#: Short caps so the whole matrix runs in about two minutes and cannot exhaust the machine.
LIMITS = """
# --- test course: short limits ---
c.Execute.timeout = 60
c.GradingLimits.cell_cpu = 5
c.GradingLimits.grade_cell_cpu = 3
c.GradingLimits.stall = 4
c.GradingLimits.interrupt_grace = 3
c.Deadlines.due = {"01_tiny": "2025-01-15 09:30:00 UTC"}
c.GradingLimits.notebook_timeout = 180
c.GradingLimits.memory_mb = 1024
c.GradingLimits.output_kb = 64
"""

SQUARE = "def square(x):\n    \"\"\"Return x squared.\"\"\"\n    ### BEGIN SOLUTION\n    return x * x\n    ### END SOLUTION\n"
TOTAL = "def total(xs):\n    \"\"\"Return the sum of xs.\"\"\"\n    ### BEGIN SOLUTION\n    return sum(xs)\n    ### END SOLUTION\n"
SQUARE_CHECK = (
    '"""Check that square squares."""\n'
    "from helpers.checks import check_equal, solved\n\n"
    'check_equal(solved(square, 3), 9, "square(3)")\n'
    "### BEGIN HIDDEN TESTS\n"
    f'check_equal(solved(square, -4), 16, "square(-4)")  # {HIDDEN_MARK}-1\n'
    "### END HIDDEN TESTS\n"
)
#: A line in both halves of ``total-check``, as the chapters' checks repeat ``with fake_machine(cuda=1):``:
#: it is no secret, so finding it in a page must not reject the page.
SHARED_LINE = "xs = [1, 2]"
TOTAL_CHECK = (
    '"""Check that total adds up."""\n'
    "from helpers.checks import check_equal, solved\n\n"
    f"{SHARED_LINE}\n"
    'check_equal(solved(total, xs), 3, "total([1, 2])")\n'
    "### BEGIN HIDDEN TESTS\n"
    f"{SHARED_LINE}\n"
    f'check_equal(solved(total, range(5)) + solved(total, xs), 13, "total")  # {HIDDEN_MARK}-2\n'
    "### END HIDDEN TESTS\n"
)


def _meta(**nbgrader) -> dict:
    return {"nbgrader": {"schema_version": 3, **nbgrader}}


def source_notebook() -> nbformat.NotebookNode:
    """The instructor's version of ``01_tiny``, with solutions and hidden tests."""
    cells = [
        new_markdown_cell("# A tiny assignment\nWrite `square` and `total`."),
        new_code_cell("import math  # an ordinary cell"),
        new_code_cell("import time\ntime.sleep(60)  # a heavy demonstration: skipped while grading", metadata={"tags": ["demo"]}),
        new_code_cell(SQUARE, metadata=_meta(solution=True, grade=False, locked=False, grade_id="square")),
        new_code_cell(SQUARE_CHECK, metadata=_meta(solution=False, grade=True, locked=True, grade_id="square-check", points=1)),
        new_code_cell(TOTAL, metadata=_meta(solution=True, grade=False, locked=False, grade_id="total")),
        new_code_cell(TOTAL_CHECK, metadata=_meta(solution=False, grade=True, locked=True, grade_id="total-check", points=2)),
    ]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def _cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _solve(nb, square="def square(x):\n    return x * x\n", total="def total(xs):\n    return sum(xs)\n"):
    nb = copy.deepcopy(nb)
    _cell(nb, "square").source = square
    _cell(nb, "total").source = total
    return nb


def solved(nb):
    return _solve(nb)


def blank(nb):
    return copy.deepcopy(nb)


def wrong(nb):
    return _solve(nb, square="def square(x):\n    return x * abs(x)\n")


def different(nb):
    return _solve(
        nb,
        square="square = lambda x: x ** 2\n",
        total="def total(xs):\n    result = 0\n    for x in xs:\n        result += x\n    return result\n",
    )


def assert_true(nb):
    nb = copy.deepcopy(nb)
    _cell(nb, "square-check").source = "assert True\n"
    return nb


def deleted_test(nb):
    nb = solved(nb)
    nb.cells.remove(_cell(nb, "total-check"))
    return nb


def stripped_meta(nb):
    nb = solved(nb)
    cell = _cell(nb, "total-check")
    del cell.metadata["nbgrader"]
    cell.source = "pass  # the learner emptied this test too\n"
    return nb


def infinite_loop(nb):
    return _solve(nb, square="while True:\n    pass\n")


def swallow_interrupt(nb):
    loop = "import time\nwhile True:\n    try:\n        time.sleep(0.2)\n    except KeyboardInterrupt:\n        pass\n"
    return _solve(nb, square=loop)


def memory_bomb(nb):
    bomb = "hog = []\nwhile True:\n    hog.append(bytearray(50 * 2**20))\n"
    return _solve(nb, square=bomb)


def memory_spread(nb):
    spread = ("import subprocess, sys, time\n"
              "code = 'b = bytearray(400 * 2**20)\\nfor i in range(0, len(b), 4096): b[i] = 1\\n"
              "import time; time.sleep(120)'\n"
              "kids = [subprocess.Popen([sys.executable, '-c', code]) for _ in range(4)]\n"
              "time.sleep(120)\n")
    return _solve(nb, square=spread)


def output_flood(nb):
    # short lines: past nbgrader's own 1000-line LimitOutput long before the cap, which once dropped the cap's note
    flood = "for _ in range(20_000):\n    print('x\\n' * 500)\n\ndef square(x):\n    return x * x\n"
    return _solve(nb, square=flood)


def dies(nb):
    return _solve(nb, square="import os\nos._exit(1)\n")


#: The course folder of the test (set by ``make_course``): a hostile learner may know the grader's paths.
COURSE_ROOT: Path | None = None
REPO = Path(__file__).resolve().parents[2]  # this repository: its solutions/ must be out of reach too
SNOOP_MARK = "SNOOP-RESULT"

SNOOP = """import os, socket
root = {root!r}
repo = {repo!r}
targets = [repo + '/solutions', repo + '/tests/submissions', root + '/solutions/01_tiny/01_tiny.ipynb', root + '/gradebook.db', root + '/autograded/.grading/outcomes.sqlite',
           root + '/submitted/solved/01_tiny/01_tiny.ipynb', root + '/feedback', root, '../../../solutions/01_tiny/01_tiny.ipynb']
for path in targets:
    try:
        found = os.listdir(path) if os.path.isdir(path) else open(path, 'rb').read(50)
        print('{mark} LEAK read', path, str(found)[:60])
    except OSError as err:
        print('{mark} blocked read', path, type(err).__name__)
for path in [root + '/solutions/01_tiny/pwned.txt', root + '/pwned.txt', root + '/autograded/pwned.txt',
             repo + '/helpers/pwned.txt']:
    try:
        open(path, 'w').write('pwned')
        print('{mark} LEAK write', path)
    except OSError as err:
        print('{mark} blocked write', path, type(err).__name__)
for host in [('1.1.1.1', 53), ('127.0.0.1', 22)]:
    try:
        socket.create_connection(host, timeout=2).close()
        print('{mark} LEAK network', host)
    except OSError as err:
        print('{mark} blocked network', host, type(err).__name__)
open('scratch.txt', 'w').write('a learner may write in its own folder')
print('{mark} wrote scratch', os.path.exists('scratch.txt'))

def square(x):
    return x * x
"""


def snoop(nb):
    return _solve(nb, square=SNOOP.format(root=str(COURSE_ROOT), repo=str(REPO), mark=SNOOP_MARK))


ROT13 = """import codecs, linecache, sys

def square(x):
    texts = ['square']
    try:  # every caller's file, and every string its frame holds (the check's source): the referee refuses it
        frame = sys._getframe(1)
        while frame is not None:
            texts.append(''.join(linecache.getlines(frame.f_code.co_filename)))
            texts += [str(v) for v in frame.f_locals.values() if isinstance(v, str)]
            texts.append(str(frame.f_globals.get('In', '')))
            frame = frame.f_back
    except PermissionError:
        pass
    print(codecs.encode(chr(10).join(texts), 'rot13'))
    return x * x
"""


def rot13_leak(nb):
    return _solve(nb, square=ROT13)


def long_message(nb):
    return _solve(nb, total="def total(xs):\n    raise ValueError('A' * 5000)\n")


def loop_in_check(nb):
    return _solve(nb, total="def total(xs):\n    while True:\n        pass\n")


def hang_in_check(nb):
    hang = ("import time\n\ndef total(xs):\n    while True:\n        try:\n            time.sleep(0.2)\n"
            "        except KeyboardInterrupt:\n            pass\n")
    return _solve(nb, total=hang)


def killed_in_check(nb):
    return _solve(nb, square="import os, signal\n\ndef square(x):\n    os.kill(os.getpid(), signal.SIGKILL)\n")


# --- tampering (issue 24): ``square`` is wrong (0), ``total`` right; each trick tries to make square-check pass.
# Each worked when checks ran in the learner's kernel, except ``trojan`` (aimed at the verdict worker itself).
PATCH_CHECKS = """import sys
import helpers.checks, helpers.checks.core
for name, module in list(sys.modules.items()):
    if name.startswith('helpers.checks'):
        for attr in dir(module):
            if attr.startswith(('check', 'solved', 'passed', '_fail')):
                setattr(module, attr, lambda *a, **k: None)
"""
STAND_IN = """import sys, types
import helpers.checks, helpers.checks.core

class _Yes(types.ModuleType):
    def __getattr__(self, name):
        return lambda *a, **k: None

for name in [n for n in sys.modules if n.startswith('helpers.checks')]:
    sys.modules[name] = _Yes(name)
sys.modules['helpers'].checks = sys.modules['helpers.checks']
"""
SILENCE = """shell = get_ipython()
shell.showtraceback = lambda *a, **k: None
shell._showtraceback = lambda *a, **k: None
"""
ALWAYS_EQUAL = """class Yes(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__

def square(x):
    return Yes(0)
"""
PATCH_IN_CALL = """def square(x):
    import helpers.checks.core as core
    core._fail = lambda *a, **k: None  # while the check runs: its comparison no longer fails
    return 0
"""
TROJAN = """class _Trojan:
    def __reduce__(self):  # runs where the definitions are loaded: patch the check, then be a wrong square
        return (eval, ("(setattr(__import__('helpers.checks.core', fromlist=['core']), '_fail', "
                       "lambda *a, **k: None), lambda x: 0)[1]",))

square = _Trojan()
"""
EXIT_SUCCESS = """def square(x):
    import os
    os._exit(0)  # end the process running the check 'successfully'
"""


# --- tampering, part 2 (issue 33): tricks written from the shipped code against the verdict worker itself.
CODE_SWAP = """def square(x):
    import helpers.checks.core as core
    core.check_equal.__code__ = (lambda *a, **k: None).__code__  # the same function object, another body
    return 0
"""
FRAME_READ = """import sys

def square(x):
    frame = sys._getframe(1)  # the check's frames hold the expected value (and the cell's code, hidden tests too)
    while frame is not None:
        numbers = [c for c in frame.f_code.co_consts if type(c) is int and c > 1]
        if numbers:
            return numbers[0]
        frame = frame.f_back
    return 0
"""
GC_SNAPSHOT = """import gc

def square(x):
    for obj in gc.get_objects():  # the guard's snapshot of the grader, to empty it
        if type(obj).__name__ == 'Guard':
            obj.attributes.clear()
    return 0
"""
FORGED_REPORT = """import os

def square(x):
    report = repr({'error': None, 'tampered': []}).encode()
    for fd in range(3, 64):  # the child's report pipe is one of these
        try:
            os.write(fd, len(report).to_bytes(8, 'big') + bytes(32) + report)
        except OSError:
            pass
    return 0
"""

STASHED_REFERENCE = """import helpers.checks.ch08 as ch08

def square(x, _reference=ch08.expected_decision):  # a check module's reference, kept where no tripwire looks
    try:
        _reference(1.0, [2.0], [1.0], 3)
    except Exception:
        pass
    return 0
"""
RAISED_CAP = """def square(x):
    import helpers.checks.ch08 as ch08
    ch08.MAX_SYNCS = 10 ** 9  # a constant a verdict reads, changed while the check runs
    return 0
"""


def _tampered(trick: str, square: str = "def square(x):\n    return 0\n"):
    return lambda nb: _solve(nb, square=f"{trick}\n{square}")


patch_checks = _tampered(PATCH_CHECKS)
stand_in_module = _tampered(STAND_IN)
silenced_traceback = _tampered(SILENCE)
always_equal = _tampered("", ALWAYS_EQUAL)
patch_in_call = _tampered("", PATCH_IN_CALL)
trojan = _tampered("", TROJAN)
exit_success = _tampered("", EXIT_SUCCESS)
code_swap = _tampered("", CODE_SWAP)
frame_read = _tampered("", FRAME_READ)
gc_snapshot = _tampered("", GC_SNAPSHOT)
forged_report = _tampered("", FORGED_REPORT)
stashed_reference = _tampered("", STASHED_REFERENCE)
raised_cap = _tampered("", RAISED_CAP)
TAMPERING = {"patch_checks": patch_checks, "stand_in_module": stand_in_module,
             "silenced_traceback": silenced_traceback, "always_equal": always_equal, "patch_in_call": patch_in_call,
             "trojan": trojan, "exit_success": exit_success, "code_swap": code_swap, "frame_read": frame_read,
             "gc_snapshot": gc_snapshot, "forged_report": forged_report, "stashed_reference": stashed_reference,
             "raised_cap": raised_cap}


def all_stripped(nb):
    nb = solved(nb)
    for cell in nb.cells:
        cell.metadata.pop("nbgrader", None)
    return nb


def bad_json(nb):
    return b'{"cells": [ this is not json'


def unknown_student(nb):
    return solved(nb)


CASES = {
    f.__name__: f
    for f in (
        solved, blank, wrong, different, assert_true, deleted_test, stripped_meta, infinite_loop,
        swallow_interrupt, loop_in_check, hang_in_check, killed_in_check, memory_bomb, memory_spread,
        output_flood, dies, snoop, rot13_leak,
        long_message, all_stripped, bad_json, unknown_student,
    )
} | TAMPERING

#: student -> (status, score or None, text the status detail must contain)
OUTCOMES = {
    "solved": ("graded", 3.0, ""),
    "blank": ("wrong", 0.0, ""),
    "wrong": ("wrong", 2.0, ""),
    "different": ("graded", 3.0, ""),
    "assert_true": ("tampered", 0.0, "square-check"),
    "deleted_test": ("tampered", 3.0, "total-check"),
    "stripped_meta": ("tampered", 3.0, "total-check"),
    "infinite_loop": ("timed out", 2.0, "5 s"),
    "swallow_interrupt": ("timed out", 2.0, "`square` ran past its limit"),
    "loop_in_check": ("timed out", 1.0, "`total-check` ran past its limit (3 s of cpu for a grade cell"),
    "hang_in_check": ("timed out", 1.0, "`total-check` ran past its limit (3 s of cpu for a grade cell"),
    "killed_in_check": ("crashed", 2.0, "the kernel died in `square-check`"),
    "memory_bomb": ("crashed", 2.0, "memory"),
    "memory_spread": ("crashed", 2.0, "hit the memory cap (1024 MiB) in `square`"),
    "output_flood": ("graded", 3.0, "output"),
    "dies": ("crashed", 2.0, "the kernel died in `square`"),
    "snoop": ("graded", 3.0, ""),
    "rot13_leak": ("tampered", 2.0, "reached into part of the grader"),
    "long_message": ("wrong", 1.0, ""),
    "all_stripped": ("unreadable", None, "no nbgrader cell at all"),
    "bad_json": ("unreadable", None, "json"),
    "unknown_student": ("unknown", None, "roster"),
    # tampering: square-check lost in every case, total-check kept
    "patch_checks": ("wrong", 2.0, ""),
    "stand_in_module": ("wrong", 2.0, ""),
    "silenced_traceback": ("wrong", 2.0, ""),
    "always_equal": ("wrong", 2.0, ""),
    "patch_in_call": ("tampered", 2.0, "replaced or reached into part of the grader"),
    "trojan": ("tampered", 2.0, "replaced or reached into part of the grader"),
    "code_swap": ("tampered", 2.0, "reached into part of the grader"),
    "frame_read": ("tampered", 2.0, "reached into part of the grader"),
    "gc_snapshot": ("tampered", 2.0, "reached into part of the grader"),
    "forged_report": ("tampered", 2.0, "reached into part of the grader"),
    "stashed_reference": ("tampered", 2.0, "reached into part of the grader"),
    "raised_cap": ("tampered", 2.0, "reached into part of the grader"),
    "exit_success": ("crashed", 2.0, "square-check"),
}

#: Students the course knows (the gradebook's roster); ``unknown_student`` is not among them.
ROSTER = [name for name in CASES if name != "unknown_student"] + ["bystander", "renamed"]


def write_submission(course: Path, student: str, assignment: str, content,
                     timestamp: str = "2025-01-15 10:00:00.000000 UTC") -> Path:
    """Put a learner's notebook where ``nbgrader collect`` would: submitted/<student>/<assignment>/."""
    folder = course / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{ASSIGNMENT}.ipynb"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        nbformat.write(content, str(path))
    (folder / "timestamp.txt").write_text(timestamp)
    return path


def released(course: Path) -> nbformat.NotebookNode:
    return nbformat.read(str(course / "notebooks" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"), as_version=4)


def make_course(course: Path, repo_config: Path) -> None:
    """The course folder: config (the repo's plus ``LIMITS``), the source notebook."""
    global COURSE_ROOT
    COURSE_ROOT = Path(course).resolve()
    course.mkdir(parents=True, exist_ok=True)
    (course / "nbgrader_config.py").write_text(repo_config.read_text() + LIMITS)
    src = course / "solutions" / ASSIGNMENT
    src.mkdir(parents=True, exist_ok=True)
    nbformat.write(source_notebook(), str(src / f"{ASSIGNMENT}.ipynb"))
