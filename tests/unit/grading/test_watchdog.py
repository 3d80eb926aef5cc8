"""The grading watch (course_tools/grading/engine/watchdog.py): CPU time, not wall-clock time, decides a cell's limit.

Each case is a real process tree: a loop that spends its CPU budget, a sleep that stalls, a loop that
ignores the interrupt (killed after the grace period), and work spread over a child process, whose CPU
counts too. Budgets are a second or two, so the file runs in about 15 s.
"""

import subprocess
import sys
import time

import psutil

from course_tools.grading.engine.watchdog import CellWatch, tree_cpu_seconds

LOOP = "while True: pass"
SLEEP = "import time; time.sleep(60)"
STUBBORN = ("import time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
            "while True: pass")
CHILD_WORKS = ("import subprocess, sys\n"
               "subprocess.run([sys.executable, '-c', 's = 0\\nfor i in range(30_000_000): s += i'])\n"
               "import time; time.sleep(60)")


def _start(code: str) -> subprocess.Popen:
    """``code`` in a new Python, whose Ctrl-C raises KeyboardInterrupt as a kernel's does: a process started
    from a pytest-xdist worker inherits SIGINT ignored, and Python then never installs its handler."""
    return subprocess.Popen([sys.executable, "-c", f"import signal\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n{code}"])


def _watch(proc, budget, stall=30.0, grace=2.0, until=20.0) -> CellWatch:
    with CellWatch(proc.pid, budget, stall, grace) as watch:
        deadline = time.monotonic() + until
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
    proc.kill()
    proc.wait()
    return watch


def test_a_loop_is_stopped_when_its_cpu_budget_is_spent():
    proc = _start(LOOP)
    watch = _watch(proc, budget=1.0, grace=15.0)  # a busy machine may take seconds to schedule the interrupt
    assert watch.stop is not None and watch.stop.reason == "cpu" and not watch.stop.killed
    assert 1.0 <= watch.stop.cpu_s < 2.5
    assert proc.returncode != 0  # the interrupt ended it (KeyboardInterrupt)


def test_a_sleep_is_stopped_as_a_stall_and_not_charged_cpu():
    proc = _start(SLEEP)
    watch = _watch(proc, budget=10.0, stall=1.5)
    assert watch.stop is not None and watch.stop.reason == "stall" and watch.stop.cpu_s < 1.0


def test_an_ignored_interrupt_ends_in_a_kill_after_the_grace_period():
    proc = _start(STUBBORN)
    watch = _watch(proc, budget=0.5, grace=1.0)
    assert watch.stop is not None and watch.stop.killed and proc.returncode == -9


def test_the_cpu_of_a_child_process_counts():
    proc = _start(CHILD_WORKS)
    time.sleep(0.2)
    before = tree_cpu_seconds(proc.pid)
    watch = _watch(proc, budget=None, stall=1.5, until=30.0)
    assert watch.stop is not None and watch.stop.reason == "stall"  # the child ended; then only a sleep
    assert watch.cpu_s > 0.5 > before, "the child's work is in the tree's CPU time after it ended"


def test_no_budget_and_a_quick_cell_stop_nothing():
    proc = _start("print('done')")
    watch = _watch(proc, budget=None)
    assert watch.stop is None and proc.returncode == 0
    assert not psutil.pid_exists(proc.pid) or psutil.Process(proc.pid).status() == psutil.STATUS_ZOMBIE


# Three children of 150 MiB each: each far under a 300 MiB cap on one process, together past it.
CHILDREN_FILL = ("import subprocess, sys, time\n"
                 "code = 'import time\\nb = bytearray(150 * 2**20)\\nfor i in range(0, len(b), 4096): b[i] = 1\\n"
                 "time.sleep(60)'\n"
                 "kids = [subprocess.Popen([sys.executable, '-c', code]) for _ in range(3)]\n"
                 "time.sleep(60)")


def test_the_memory_of_every_process_together_is_capped():
    """A cell whose worker processes each stay under the cap, but not together, is stopped: the children are
    killed at once and the parent (the kernel) is interrupted, and the stop says how much they used."""
    proc = _start(CHILDREN_FILL)
    with CellWatch(proc.pid, None, 30.0, 5.0, memory_mb=300) as watch:
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
    children = psutil.Process().children(recursive=True)
    proc.kill()
    proc.wait()
    assert watch.stop is not None and watch.stop.reason == "memory", watch.stop
    assert watch.stop.memory_mb > 300
    assert proc.returncode != -9  # the parent was interrupted, not killed
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE and c.ppid() == proc.pid]


def test_memory_under_the_cap_is_left_alone():
    proc = _start("b = bytearray(50 * 2**20)\nimport time; time.sleep(2)")
    with CellWatch(proc.pid, None, 30.0, 5.0, memory_mb=300) as watch:
        proc.wait(timeout=30)
    assert watch.stop is None and proc.returncode == 0


def test_the_memory_cap_message_names_the_cap_and_what_counts():
    from nbformat.v4 import new_code_cell

    from course_tools.grading.engine.execute import LimitedExecute
    from course_tools.grading.engine.watchdog import Stop

    ex = LimitedExecute()
    message = ex.stop_message(new_code_cell("x"), Stop("memory", 1.0, 2.0, memory_mb=5000))
    assert "5000 MiB" in message and f"{ex.limits.memory_mb} MiB" in message
    assert "c.GradingLimits.memory_mb" in message and "every process" in message
