"""Release: the learner notebooks generated from ``solutions/`` through nbgrader, and the gradebook kept in step.

- ``generate.py``: ``release`` (the learner tree, with the guard that never overwrites a learner's edits) and
  ``generate_release`` (nbgrader's generate_assignment into any folder, which grading also uses to register an
  assignment);
- ``gradebook_changes.py``: what a change of checks after grading does to the gradebook;
- ``tag_cells.py``: the preprocessor that lets Run All go on past a check that fails.
"""
