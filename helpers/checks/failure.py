"""The one exception a failed check raises (the bottom of ``helpers.checks``: it imports nothing of the course)."""

__all__ = ["CheckFailed"]


class CheckFailed(AssertionError):
    """A check under an exercise failed; the message tells the learner what to fix.

    An ``AssertionError``, so nbgrader counts it as a failed test.
    """
