"""nbgrader settings for the Korean edition's course (한국어판): the English course's, with this folder as root.

The Korean edition is a course folder of its own (solutions/, notebooks/, its gradebook and exchange here),
because nbgrader scores a notebook missing from an assignment 0: a Korean class releases, submits and is
graded here, with the same grade ids and points as the English course. Every setting is the English
course's (../nbgrader_config.py, read and run here); only the course id and the solution stub differ.
``solutions/`` here is generated (``python -m course_tools translate build``), never edited by hand.
"""

import os

c = get_config()  # noqa: F821 - provided by traitlets when nbgrader loads this file

_english = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "nbgrader_config.py")
with open(_english, encoding="utf-8") as _f:
    exec(compile(_f.read(), _english, "exec"))  # noqa: S102 - the English course's own settings file

# its own exchange course id, so a Korean and an English class on one machine never fetch each other's work
if not os.environ.get("COURSE_ID", "").strip():
    c.CourseDirectory.course_id = c.CourseDirectory.course_id + "-ko"
# the checks speak Korean in this course's grading processes too: the kernel runs the notebook's setting cell, and
# the verdict worker (which never runs learner cells) reads COURSE_LANG, which the sandbox passes on
os.environ["COURSE_LANG"] = "ko"
# the stub a learner sees where the solution was, in both languages
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE (여기에 코드를 작성하세요)\nraise NotImplementedError()"}
