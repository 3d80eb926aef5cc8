"""Shared pytest set-up: a non-interactive plotting backend and the `gpu` marker."""

import os
import re

os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

from course_tools.grading import ensure_tools_on_path  # noqa: E402

ensure_tools_on_path()  # nbgrader runs `alembic` by name


GPU_SKIP_REASON = "needs a CUDA GPU; this machine has none (torch.cuda.is_available() is False)"
#: The only reasons a test may be skipped for. Any other skip (a stray pytest.skip, an
#: importorskip that hides a missing dependency) fails the run, as pytorch/tutorials does.
BROWSER_SKIP_REASON = "needs Chromium at /usr/bin/chromium (Debian's `chromium` package; .ci/run installs it)"
#: tests/unit/helpers/test_cuda_branches.py fakes CUDA tensors, which only a CUDA build of torch can (CI's torch-floor venv is one)
CUDA_BUILD_SKIP_REASON = "needs a CUDA build of torch to fake CUDA tensors (this torch is a CPU-only build)"
#: tests/support/classroom.py makes real Unix users (useradd) and gives files to other users (chown): root only
ROOT_SKIP_REASON = "needs root to make Unix users and give files away (useradd, chown); CI runs as root"
#: tests/e2e/test_hub.py starts JupyterHub, whose proxy is npm's configurable-http-proxy (package.json; .ci/run: npm ci)
PROXY_SKIP_REASON = "needs configurable-http-proxy (run `npm ci` in the repository; .ci/run does)"
#: the torch-floor venv's CUDA build of torch 2.11 pins triton 3.6, whose interpreter cannot run a loop that carries a
#: Python float into tl reductions (`total = 0.0; total += tl.sum(x)`: "only 0-dimensional arrays can be converted to
#: Python scalars"); 3.9, which a CPU torch installs, runs it, and compiled Triton always did (docs/STACK_NOTES.md)
OLD_INTERPRETER_SKIP_REASON = ("Triton's interpreter before 3.9 cannot carry a Python float through a loop into tl "
                               "reductions (the torch-floor venv pins triton 3.6)")
ALLOWED_SKIP_REASONS = (GPU_SKIP_REASON, BROWSER_SKIP_REASON, CUDA_BUILD_SKIP_REASON, ROOT_SKIP_REASON,
                        PROXY_SKIP_REASON, OLD_INTERPRETER_SKIP_REASON)


#: A parametrized test whose id starts with a chapter (``[06_multi_gpu]``, ``[06_multi_gpu/no_barrier]``,
#: ``[06_multi_gpu-mistakes]``) belongs to that chapter's scope.
CHAPTER_ID = re.compile(r"\[(\d\d_[A-Za-z0-9_]+?)(?:[/\-].*)?\]$")


def chapter_scope(nodeid: str) -> str:
    """The unit of work one xdist worker runs whole: a chapter's tests of one module (they share that chapter's
    cached grading run), else what ``--dist loadscope`` uses (a class, else a module; a notebook's cells).

    So each chapter's exercises and round trip are a scope of their own without a generated test class per chapter,
    and xdist (3.8) starts the scopes with most tests first, with no hand-timed list to go stale.
    """
    module, _, rest = nodeid.partition("::")
    found = CHAPTER_ID.search(rest)
    if found:
        return f"{module}::{found.group(1)}"
    return nodeid.rsplit("::", 1)[0]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadscope`` (pyproject's addopts), with :func:`chapter_scope` as the scope."""
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ChapterScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return chapter_scope(nodeid)

    return ChapterScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    """Skip tests marked ``gpu`` on machines without CUDA, and say why."""
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

    Built once per run, not once per xdist worker (about 40 s of a 2-core machine each time): the first worker
    to get here builds it in the run's shared temporary folder under a file lock (filelock, which torch already
    needs; the pytest-xdist documentation's recipe), and every worker takes a copy of its own, so a test that
    writes into its course never changes another's.
    """
    import shutil

    from filelock import FileLock

    from support.layout import ROOT
    from course_tools.grading.release.generate import generate_release

    import os

    base = tmp_path_factory.getbasetemp()
    # under xdist a worker's base is <this run's folder>/popen-gwN: its parent is this run's alone; without xdist the
    # parent holds every earlier run's folder too, whose release would be stale
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "released_course"
    with FileLock(f"{shared}.lock"):
        if not (shared / ".built").exists():
            shutil.rmtree(shared, ignore_errors=True)
            shared.mkdir()
            shutil.copy(ROOT / "nbgrader_config.py", shared / "nbgrader_config.py")
            shutil.copytree(ROOT / "solutions", shared / "solutions")
            generate_release(shared / "release", root=shared, db_url=f"sqlite:///{shared / 'gradebook.db'}")
            (shared / ".built").touch()
    course = tmp_path_factory.mktemp("course")
    shutil.copytree(shared, course, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".built"))
    return course
