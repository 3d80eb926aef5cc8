"""The fake machine's cell limit (``support.fake_cuda.CellLimit``) stops a cell only in code of ours.

Why it matters: on the floor torch, a stop raised inside torch's own Python (FakeTensorMode's dispatch, called from
C++ mid-operator) aborted the whole test process, and under pytest-xdist 3.8 the crashed worker's replacement then
waited forever. These tests drive the limit with a real timer on plain Python code, so they run on any torch build.
"""

from __future__ import annotations

import signal
import sys
import threading
import time

import pytest
from support import fake_cuda as fc

pytestmark = pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                                reason="signals reach the main thread only")

# A function of "torch's": its code is named like no cell and no file of helpers/, so the limit must not stop it.
FOREIGN = compile("""
def foreign(log, seconds):
    log.append("entered")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    log.append("left")
""", "<not ours>", "exec")


def run_cell(source: str, namespace: dict, after: float = 0.1, every: float = 0.05) -> BaseException | None:
    """Run ``source`` as cell 0 under a limit due ``after`` seconds, repeating ``every``; return what stopped it."""
    limit = fc.CellLimit("past its limit")
    old = signal.signal(signal.SIGALRM, limit.on_signal)
    limit.arm()
    signal.setitimer(signal.ITIMER_REAL, after, every)
    try:
        exec(compile(source, "<cell 0>", "exec"), namespace)
    except fc.CellTimedOut as err:
        return err
    finally:
        limit.disarm()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return None


def last_frame(err: BaseException) -> str:
    """The code the stop interrupted: the innermost frame below the limit's own handler."""
    names = []
    tb = err.__traceback__
    while tb is not None:
        names.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    return [name for name in names if name != fc.__file__][-1]


def test_a_cell_spinning_in_its_own_code_is_stopped():
    err = run_cell("for _ in range(10**9):\n    pass", {})
    assert isinstance(err, fc.CellTimedOut), "a cell looping in its own code was never stopped"
    assert last_frame(err) == "<cell 0>"


def test_a_cell_asleep_is_stopped_at_once():
    start = time.monotonic()
    err = run_cell("import time\ntime.sleep(30)", {})
    assert isinstance(err, fc.CellTimedOut), "a sleeping cell was never stopped"
    assert time.monotonic() - start < 20, "the stop waited for the sleep to end"


def test_the_stop_waits_until_code_that_is_not_ours_returns():
    namespace: dict = {"time": time}
    exec(FOREIGN, namespace)
    log: list[str] = []
    namespace["log"] = log
    err = run_cell("for _ in range(50):\n    foreign(log, 0.2)", namespace)
    assert isinstance(err, fc.CellTimedOut), "a cell calling into code not ours was never stopped"
    assert last_frame(err) == "<cell 0>", f"the stop landed in {last_frame(err)}, not in the cell"
    assert log.count("entered") == log.count("left") >= 1, f"code not ours was cut off mid-way: {log}"
    assert sys.gettrace() is None, "the limit left line tracing on after the cell"


def test_a_disarmed_limit_stops_nothing():
    limit = fc.CellLimit("past its limit")
    old = signal.signal(signal.SIGALRM, limit.on_signal)
    limit.arm()
    limit.disarm()
    signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)
    try:
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert sys.gettrace() is None
