"""Worker process for tests/support/layout.py: run a chapter's graded cells once per submission, as a grader would.

Run as ``python cell_runner.py JOB.json RESULTS.jsonl``. The job holds the chapter's non-demo code cells
and a list of runs (each a set of solution-cell replacements). For every run the cells execute in order in
a fresh ``__main__``-like namespace; like nbgrader, execution goes on after a failing cell, and any
``BaseException`` a cell raises (``SystemExit``, ``KeyboardInterrupt``, a timeout) is that cell's outcome.

After every run the worker compares torch's global state and the attributes that checks patch with what
they were before, records any difference as the run's ``leaks`` (a check that forgets to restore a patch,
or a learner's mistake that no check undid, would otherwise change what the next submission is graded
against), and puts everything back. One JSON line per run is appended to RESULTS (and flushed), so a run
that kills the process (``os._exit``) loses only itself: the parent starts a new worker for the rest.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import io
import json
import os
import signal
import sys
import time
import warnings

os.environ.setdefault("MPLBACKEND", "Agg")

import torch  # noqa: E402

#: CPU seconds one cell may use in this process (SIGPROF: CPU time, which a busy machine hardly changes, as the
#: grader's limit is: course_tools/grading/engine/watchdog.py), and the wall-clock backstop for one that waits on nothing
CELL_TIMEOUT_S = int(os.environ.get("COURSE_CELL_TIMEOUT", "120"))
CELL_WALL_S = 10 * CELL_TIMEOUT_S

#: The surface a check may patch and must put back (and a learner's function may not replace while a check
#: runs): the one list, in course_tools/grading/engine/apart_worker.py, which the grader's verdict worker guards.
from course_tools.grading.engine.apart_worker import fresh_namespace, prepare, watched_attributes  # noqa: E402


class CellTimeout(BaseException):
    """A cell ran past its limit (a BaseException, so `except Exception` cannot hide it)."""


def _on_cpu_limit(signum, frame):
    raise CellTimeout(f"the cell used more than {CELL_TIMEOUT_S} s of CPU")


def _on_alarm(signum, frame):
    raise CellTimeout(f"the cell ran for more than {CELL_WALL_S} s")


def _limit_cell(on: bool) -> None:
    """Arm (or disarm) both limits of one cell: CPU time (ITIMER_PROF) and the wall-clock backstop."""
    signal.setitimer(signal.ITIMER_PROF, CELL_TIMEOUT_S if on else 0)
    signal.alarm(CELL_WALL_S if on else 0)


def _attributes() -> dict[tuple[str, str], object]:
    """Every watched attribute, and every function of every loaded helpers module."""
    return watched_attributes()


def _settings() -> dict[str, object]:
    return {
        "grad mode": torch.is_grad_enabled(),
        "inference mode": torch.is_inference_mode_enabled(),
        "default dtype": torch.get_default_dtype(),
        "threads": torch.get_num_threads(),
        "deterministic algorithms": torch.are_deterministic_algorithms_enabled(),
        "anomaly detection": torch.is_anomaly_enabled(),
        "float32 matmul precision": torch.get_float32_matmul_precision(),
        "tf32 matmul": torch.backends.cuda.matmul.allow_tf32,
        "tf32 cudnn": torch.backends.cudnn.allow_tf32,
        "working directory": os.getcwd(),
    }


def _restore_settings(before: dict[str, object]) -> None:
    torch.set_grad_enabled(before["grad mode"])
    torch.set_default_dtype(before["default dtype"])
    torch.set_num_threads(before["threads"])
    torch.use_deterministic_algorithms(before["deterministic algorithms"])
    torch.set_anomaly_enabled(before["anomaly detection"])
    torch.set_float32_matmul_precision(before["float32 matmul precision"])
    torch.backends.cuda.matmul.allow_tf32 = before["tf32 matmul"]
    torch.backends.cudnn.allow_tf32 = before["tf32 cudnn"]
    os.chdir(before["working directory"])


#: torch's global settings, for other test helpers (tests/support/fake_cuda.py) that must put them back too
torch_settings, restore_torch_settings = _settings, _restore_settings


def _restore_attribute(key: tuple[str, str], value: object) -> None:
    owner_name, attr = key
    if owner_name in sys.modules:
        owner = sys.modules[owner_name]
    else:
        module_name, _, cls_name = owner_name.rpartition(".")
        owner = getattr(sys.modules[module_name], cls_name)
    setattr(owner, attr, value)


def leaks_since(settings: dict, attributes: dict) -> list[str]:
    """What differs from the snapshot, in words; everything found is put back."""
    found = []
    now = _settings()
    for key, value in settings.items():
        if now[key] != value:
            found.append(f"{key} is {now[key]!r}, was {value!r}")
    if found:
        _restore_settings(settings)
    current = _attributes()
    for key, value in attributes.items():
        if key in current and current[key] is not value:
            found.append(f"{key[0]}.{key[1]} is still replaced")
            _restore_attribute(key, value)
    return found


def run_once(cells: list[dict], replacements: dict[str, str], warnings_as_errors: list[str],
             only: list[str] | None = None) -> dict:
    """Run the cells once; return {"cells": {grade_id: [passed, message]}, "leaks": [...]}.

    ``only``: the grade cells to run (the ones the replaced solutions can reach); the others are skipped
    and absent from the result. None: all.
    """
    settings, attributes = _settings(), _attributes()
    namespace, results, stops = fresh_namespace(), {}, []
    replacements = dict(replacements)
    with warnings.catch_warnings():
        for category in warnings_as_errors:
            warnings.simplefilter("error", getattr(builtins, category))
        for cell in cells:
            if cell["grade"] and only is not None and cell["grade_id"] not in only:
                continue
            source = replacements.pop(cell["grade_id"], cell["source"]) if cell["solution"] else cell["source"]
            error, stderr = None, io.StringIO()
            _limit_cell(True)
            try:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(stderr):
                    exec(compile(source, f"<cell {cell['grade_id'] or '?'}>", "exec"), namespace)
            except BaseException as err:  # noqa: BLE001 - any failure of a cell is its outcome, as under nbgrader
                error = f"{type(err).__name__}: {err}"
            finally:
                _limit_cell(False)
            if error is None and cell["grade"] and stderr.getvalue().strip():
                # nbgrader's determine_grade scores 0 for a grade cell with a stderr stream, whatever it says
                error = f"wrote to stderr (nbgrader scores that 0): {stderr.getvalue().strip()[:300]}"
            if cell["grade"]:
                results[cell["grade_id"]] = [error is None, error or ""]
            elif error is not None:
                first = next((line for line in source.splitlines() if line.strip()), "")
                stops.append(f"{first[:80]}: {error[:300]}")
    if replacements:
        results["__unknown__"] = [False, f"no solution cell with grade_id {sorted(replacements)}"]
    namespace.clear()
    return {"cells": results, "leaks": leaks_since(settings, attributes), "stops": stops}


def main(job_path: str, results_path: str) -> None:
    job = json.loads(open(job_path).read())
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.signal(signal.SIGPROF, _on_cpu_limit)
    prepare()  # torch's lazy self-patching (the first call of some setters, importing dynamo) happens now
    for module in job.get("preload", []):
        importlib.import_module(module)
    with open(results_path, "a") as out:
        for run in job["runs"]:
            started = time.perf_counter()
            result = run_once(job["cells"], run["replacements"], job.get("warnings_as_errors", []), run.get("only"))
            result.update(key=run["key"], seconds=round(time.perf_counter() - started, 3))
            out.write(json.dumps(result) + "\n")
            out.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
