"""nbgrader settings for this course; instructors run nbgrader from this folder.

Closes the traps measured in docs/STACK_NOTES.md ("nbgrader 0.9.6"):
a deleted or stripped test cell is put back from the source and graded, every
cell has a timeout, feedback never shows hidden tests, and demonstration cells
(tag ``demo``) are skipped while grading so a class grades in minutes.
"""

c = get_config()  # noqa: F821 - provided by traitlets when nbgrader loads this file

# nbgrader's gradebook runs the `alembic` command by name: without this, any nbgrader
# command started as .venv/bin/nbgrader (venv not activated) fails on a new gradebook.
from course_tools.grading import ensure_tools_on_path  # noqa: E402

ensure_tools_on_path()

# The exchange (release_assignment -> fetch_assignment -> submit -> collect, and JupyterLab's Assignments tab):
# course id and exchange root, overridable with COURSE_ID and COURSE_EXCHANGE (course_tools/grading/exchange.py).
# Without COURSE_EXCHANGE the exchange is exchange/ in this folder; a shared machine sets its own (INSTRUCTORS.md).
import os  # noqa: E402

from course_tools.grading.exchange import exchange_settings  # noqa: E402

c.CourseDirectory.course_id, _exchange_root = exchange_settings(os.path.dirname(os.path.abspath(__file__)))
c.Exchange.root = str(_exchange_root)
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
c.CourseDirectory.db_url = "sqlite:///gradebook.db"
# collect takes only a learner's own regular files, as the Unix user the submission's name claims, with no
# future timestamp; every refusal is logged and shown in the status table (course_tools/grading/class_level/collect.py)
c.ExchangeFactory.collect = "course_tools.grading.class_level.collect.SafeExchangeCollect"

# A learner who deletes a test cell, or strips its metadata, must not turn it into
# "needs manual grade" with no score: put the cell back from the source and grade it.
c.OverwriteCells.add_missing_cells = True

# One cell may not stall a whole class, and a busy machine may not cost a correct answer a point: limits in
# CPU time (the kernel and every process it starts), which the machine's load hardly changes
# (course_tools/grading/engine/watchdog.py). A grade cell may use 20 s of CPU; one that needs more is compared with
# the reference solution on this machine, and gets 3x the reference's cost where that is more
# (course_tools/grading/engine/reference.py). A cell that uses almost no CPU for 120 s (a sleep, a deadlock) is
# interrupted; one that ignores the interrupt or kills the kernel is skipped and the rest graded
# (course_tools/grading/engine/execute.py). c.Execute.timeout is only the outer wall-clock limit per cell.
c.GradingLimits.cell_cpu = 60
c.GradingLimits.grade_cell_cpu = 20
c.GradingLimits.cpu_factor = 3
c.GradingLimits.stall = 120
c.Execute.timeout = 600
c.Execute.interrupt_on_timeout = True

# The learner's notebook goes on past a check that fails (course_tools/grading/release/tag_cells.py).
from course_tools.grading.release.tag_cells import TagCellsThatMayStop  # noqa: E402
from nbgrader.converters.generate_assignment import GenerateAssignment  # noqa: E402

c.GenerateAssignment.preprocessors = GenerateAssignment.class_traits()["preprocessors"].default() + [TagCellsThatMayStop]

# Heavy demonstrations do not count towards any grade; skip them while grading (course_tools/grading/demo_cells.py).
from course_tools.grading.demo_cells import SkipDemoCells  # noqa: E402
from nbgrader.converters.autograde import Autograde  # noqa: E402

c.Autograde.sanitize_preprocessors = Autograde.class_traits()["sanitize_preprocessors"].default() + [SkipDemoCells]

# Caps on every submission (course_tools/grading/settings.py says what enforces each): memory (each process's
# RLIMIT_DATA, and every process of the submission together) and output per cell, applied while the notebook runs
# by the engine (course_tools/grading/engine/execute.py, in place of nbgrader's Execute below); the whole
# submission's wall-clock time, enforced by `python -m course_tools grade`, which runs each submission in its own
# process and refuses a config without LimitedExecute.
from course_tools.grading.engine.execute import LimitedExecute  # noqa: E402
from nbgrader.preprocessors import Execute  # noqa: E402

c.GradingLimits.notebook_timeout = 1800
# Learner code runs in a bubblewrap sandbox (course_tools/grading/engine/sandbox.py): no course files, no network,
# writes only in its scratch folder. Without bubblewrap grading stops; only for trusted submissions:
# c.GradingLimits.sandbox = False   (or `python -m course_tools grade --no-sandbox`)
c.GradingLimits.sandbox = True
# Feedback shows each check's message, cut at this many characters.
c.GradingLimits.feedback_message_chars = 300
c.GradingLimits.memory_mb = 4096
c.GradingLimits.output_kb = 256
# the sandbox's /tmp and /dev/shm (tmpfs) and the largest file the learner's code may write; what the grader
# reads back from the kernel for a grade cell (INSTRUCTORS.md, "Limits on every submission")
c.GradingLimits.scratch_mb = 512
c.GradingLimits.export_mb = 256
c.Autograde.autograde_preprocessors = [
    LimitedExecute if p is Execute else p for p in Autograde.class_traits()["autograde_preprocessors"].default()
]

# Feedback shows no hidden test: neither its source, nor its text through a traceback, nor anything a
# learner's code printed (it can print the check's source); a check's message only, capped.
from course_tools.grading.class_level.feedback_outputs import FeedbackOutputs  # noqa: E402
from nbgrader.converters.generate_feedback import GenerateFeedback  # noqa: E402
from nbgrader.preprocessors import ClearHiddenTests  # noqa: E402

c.GenerateFeedback.preprocessors = [FeedbackOutputs, ClearHiddenTests] + [
    p for p in GenerateFeedback.class_traits()["preprocessors"].default() if p is not ClearHiddenTests
]

# Nothing a learner submits runs in a browser that shows it (issue 45): every notebook rendered as HTML (formgrader's
# submission view, feedback pages) goes through nbconvert's SanitizeHTML, tightened for nbgrader's templates
# (course_tools/grading/safe_html.py). The instructor view adds a Content-Security-Policy to formgrader's pages
# (course_tools/grading/formgrader_guard.py); `python -m course_tools feedback` puts one into each feedback page.
from course_tools.grading.safe_html import SafeNotebookHTML  # noqa: E402

c.HTMLExporter.preprocessors = [SafeNotebookHTML]

# Laptops and an LMS (INSTRUCTORS.md, "Laptops and an LMS"): `nbgrader zip_collect <assignment>` reads what the
# LMS handed back from downloaded/<assignment>/archive/ (archives are unpacked, archives inside them too) and
# takes the student id from each notebook's path, either shape:
#   .../<student id>_<NN_topic>.ipynb        one file per learner, the LMS's prefix is the id
#   .../<student id>/[<NN_topic>/]<NN_topic>.ipynb   a folder, or an archive <student id>.zip, per learner
# The id must be on the roster. If your LMS writes something else, change the student_id group.
c.FileNameCollectorPlugin.named_regexp = (
    r"^.*/extracted/(?:.*/)?(?P<student_id>(?![.]|\d\d_)[^/]+?)[_/](?:\d\d_\w+/)?(?P<file_id>\d\d_\w+\.ipynb)$"
)
