"""The engine: the grading run of one notebook, under the caps, in the sandbox, with a run record.

Nothing here knows about a class: it runs one notebook and says, as data, what happened to each cell
(``course_tools.grading.run_record``). ``nbgrader autograde`` builds ``execute.LimitedExecute`` from
``nbgrader_config.py``; the class level starts that process, one per submission (``class_level/grade.py``).
An import-linter contract (pyproject.toml) keeps this room from importing the class level or release.

- ``execute.py``: ``LimitedExecute``, put together from ``output_cap``, ``budgets``, ``apart``, with fatal-cell
  recovery and the run record;
- ``kernel.py``: the kernel manager (per-process memory cap, sandbox); ``sandbox.py``: the bubblewrap command;
- ``watchdog.py``: CPU time, stalls and the submission's memory, per cell;
- ``apart.py`` and ``apart_worker.py`` + ``referee.py``: grade cells decided in a worker process. The worker is
  started as ``python -I -c <the source of referee.py and apart_worker.py>``, not by module name, so that
  nothing of it is importable by (or visible in ``sys.modules`` to) the learner's code it judges;
- ``reference.py`` and ``calibrate.py`` (``python -m course_tools.grading.engine.calibrate``): the reference
  solution's CPU cost per grade cell on this machine.
"""
