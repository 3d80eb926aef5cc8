"""Shared pytest set-up: a non-interactive plotting backend and the `gpu` marker."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

from course_tools.grading import ensure_tools_on_path  # noqa: E402

ensure_tools_on_path()  # nbgrader runs `alembic` by name


GPU_SKIP_REASON = "needs a CUDA GPU; this machine has none (torch.cuda.is_available() is False)"
#: The only reasons a test may be skipped for. Any other skip (a stray pytest.skip, an
#: importorskip that hides a missing dependency) fails the run, as pytorch/tutorials does.
BROWSER_SKIP_REASON = "needs Chromium at /usr/bin/chromium (Debian's `chromium` package; .ci/run installs it)"
ALLOWED_SKIP_REASONS = (GPU_SKIP_REASON, BROWSER_SKIP_REASON)


#: The longest-running scopes (module or class, as `--dist loadscope` hands them out), longest first, as
#: `pytest --durations` measured them on a 2-core machine. They start first so the two workers finish
#: together instead of one of them running a 150 s scope alone at the end (longest-first scheduling).
LONGEST_FIRST = (
    "tests/test_exercises.py::TestExercises_06_multi_gpu", "tests/test_exercises.py::TestExercises_04_dataloader",
    "tests/test_exercises.py::TestExercises_03_memory", "tests/test_grading.py",
    "tests/test_roundtrip.py::TestRoundTrip_06_multi_gpu", "tests/test_browser.py",
    "tests/test_exercises.py::TestExercises_07_troubleshooting", "tests/test_roundtrip.py::TestRoundTrip_07",
    "tests/test_roundtrip.py::TestRoundTrip_03", "tests/test_roundtrip.py::TestRoundTrip_04",
    "tests/test_exchange_route.py", "tests/test_release.py", "solutions/06_multi_gpu",
)


def _start_rank(item) -> int:
    return next((i for i, prefix in enumerate(LONGEST_FIRST) if item.nodeid.startswith(prefix)), len(LONGEST_FIRST))


def pytest_collection_modifyitems(config, items):
    """Start the longest scopes first (a stable sort: a scope stays together, the rest keeps its order);
    skip tests marked ``gpu`` on machines without CUDA, and say why."""
    items.sort(key=_start_rank)
    if torch.cuda.is_available():
        return
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=GPU_SKIP_REASON))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Turn a skip whose reason is not on ALLOWED_SKIP_REASONS into a failure."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if not any(allowed in reason for allowed in ALLOWED_SKIP_REASONS):
            report.outcome = "failed"
            report.longrepr = f"skipped without an allowed reason (tests/conftest.py ALLOWED_SKIP_REASONS): {reason}"


@pytest.fixture(scope="session")
def released_course(tmp_path_factory):
    """A throwaway nbgrader course: this repo's config and solutions/, and a fresh release of every chapter.

    The release goes into its own folder with its own gradebook, so tests never touch the
    repo's notebooks/ or gradebook.db. Shared by the release and round-trip tests.
    """
    import shutil

    from course import ROOT
    from course_tools.grading.release import generate_release

    course = tmp_path_factory.mktemp("course")
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(ROOT / "solutions", course / "solutions")
    db_url = f"sqlite:///{course / 'gradebook.db'}"
    generate_release(course / "release", root=course, db_url=db_url)
    return course
