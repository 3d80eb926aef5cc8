"""The class level: grading a whole class, and what an instructor reads and hands back.

- ``collect.py``: what collect takes from the exchange (a learner's own files only);
- ``grade.py``: every submission in its own ``nbgrader autograde`` process (which runs the engine), ``jobs`` at
  once, each outcome stored;
- ``status.py``: one status per submission, from the engine's run records, the gradebook and nbgrader's exit;
- ``scores.py``: instructor overrides; ``report.py``: the status table and the CSV;
- ``feedback.py`` and ``feedback_outputs.py``: feedback pages that show no hidden test.

Stands on the ground (``course_tools.grading``'s top-level modules) and may use release and the engine; neither
imports it.
"""
