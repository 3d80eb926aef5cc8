"""A sandbox for the learner's kernel: bubblewrap (``bwrap``) around it, on Linux.

A grading kernel runs the learner's code with the grader's rights. In the
sandbox it sees only what Python needs to run the course, read-only: the
system folders (``/usr``, ``/lib``...), the Python installation and the
virtual environment, the ``helpers`` package, a few harmless files of
``/etc``, ``/sys`` and the GPU devices. It does not see the course folder
(``solutions/``, ``gradebook.db``, ``submitted/``, ``autograded/``,
``feedback/``, the stored outcomes), any home folder, or any other file of
the machine. It writes only in its own scratch folder (its ``HOME`` and
working folder), which is deleted after the run, and in its own ``/tmp`` and
``/dev/shm``: tmpfs mounts of ``c.GradingLimits.scratch_mb`` each (the
``tmp_mb`` of :func:`bwrap_command`), so writing past them fails with ENOSPC
in the learner's cell; ``/dev`` is otherwise read-only. The scratch folder
must be a folder of the host (the Unix sockets below, and the definitions a
grade cell reads, which the grader reads back from the working folder), so
its files are held by ``RLIMIT_FSIZE`` on the sandboxed process instead
(``kernel.py``, ``apart_worker.py``). It has no
network (a network namespace of its own, with no interface but a down
loopback), its own process ids, and a cleared environment.

The kernel talks to nbgrader over Unix sockets in the scratch folder (the
``ipc`` transport), because TCP on 127.0.0.1 does not cross the network
namespace. Interrupts still work: the kernel stays in bwrap's process group,
which is what ``jupyter_client`` signals.

Why a list of what is visible rather than a list of what is hidden: a
submission must not read *any* copy of the solutions or another class's work,
wherever the instructor keeps them. ``exposed_course_paths`` refuses a mount
list that would show the course folder (a virtual environment or Python
installed *above* it).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["SandboxUnavailable", "bwrap_command", "sandbox_problem", "readonly_paths", "exposed_course_paths",
           "helpers_root", "helpers_in_sandbox"]

#: Files of /etc a Python program may read (dynamic loader, users, time zone); no secrets.
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "passwd", "group", "nsswitch.conf", "localtime",
             "hosts", "host.conf", "mime.types")
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: Environment variables passed into the sandbox (everything else is cleared: tokens, paths to course data).
# COURSE_LANG and the locale variables choose the language of the checks' messages (helpers/i18n.py): the Korean
# course's config sets COURSE_LANG=ko, so its learners' feedback is Korean
KEPT_ENV = ("COURSE_LANG", "LANGUAGE", "LC_MESSAGES", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES",
            "NVIDIA_VISIBLE_DEVICES", "PYTHONHASHSEED", "PYTHONWARNINGS", "MPLBACKEND")
INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install bubblewrap`), "
                "or, only on a machine where every submission is trusted, turn the sandbox off with "
                "`c.GradingLimits.sandbox = False` in nbgrader_config.py or `python -m course_tools grade --no-sandbox`")


class SandboxUnavailable(RuntimeError):
    """No sandbox here, and the configuration asks for one."""


@functools.lru_cache(maxsize=1)
def sandbox_problem() -> str:
    """Why no sandbox can run here ("" when one can): bwrap missing, or refused by this kernel."""
    if not sys.platform.startswith("linux"):
        return f"the grading sandbox needs Linux (bubblewrap); this is {sys.platform}"
    exe = shutil.which("bwrap")
    if not exe:
        return "bubblewrap (`bwrap`) is not installed"
    probe = [exe, "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--die-with-parent", "--dev", "/dev",
             "--proc", "/proc", "true"]
    try:
        proc = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as err:
        return f"bubblewrap could not start: {err}"
    if proc.returncode != 0:
        return f"bubblewrap is installed but cannot make a sandbox here: {proc.stderr.strip()[:300]}"
    return ""


def _package_dirs() -> list[Path]:
    """Where ``helpers`` is imported from (an editable install points into the course folder)."""
    spec = importlib.util.find_spec("helpers")
    return [Path(p).resolve() for p in (spec.submodule_search_locations or [])] if spec else []


def helpers_root() -> Path:
    """The folder that holds the ``helpers`` package this process imports; the sandbox imports it from there.

    Why: the sandboxed kernel and the verdict worker must run the checks the grader runs, wherever that package
    lives (site-packages, an editable install from another clone, the course folder itself). Their own import
    system would follow the environment's install instead (an editable install points at the clone it was
    made from, which the sandbox does not show), so the grader binds this one folder's ``helpers`` read-only
    and puts the folder first on the sandbox's import path; nothing else of the folder is visible there.
    """
    dirs = _package_dirs()
    if len(dirs) != 1 or not (dirs[0] / "__init__.py").is_file():
        raise SandboxUnavailable(
            "the grader cannot tell which `helpers` package to show the sandbox (found: "
            f"{', '.join(map(str, dirs)) or 'none'}): install the course with `pip install -e <course folder>` "
            "in this environment, or run the grader from the course folder")
    return dirs[0].parent


def readonly_paths() -> list[Path]:
    """Folders the kernel may read: Python, the environment, the installed packages, ``helpers``."""
    paths = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), Path(sys.executable).resolve().parent}
    paths |= set(_package_dirs())
    for entry in sys.path:  # site-packages of the environment, a conda env's lib, ...
        p = Path(entry or ".").resolve()
        if entry and p.is_dir() and ("site-packages" in p.parts or "dist-packages" in p.parts):
            paths.add(p)
    return sorted(p for p in paths if p.exists() and not any(str(p).startswith(d + "/") or str(p) == d
                                                          for d in SYSTEM_DIRS))


def exposed_course_paths(course_root: Path, visible: list[Path]) -> list[str]:
    """Visible folders that would show the course folder (they hold it): must be empty."""
    root = Path(course_root).resolve()
    return [str(p) for p in visible if root == p or p in root.parents]


def _system_args() -> list[str]:
    args = []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    for name in ETC_FILES:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    args += ["--ro-bind-try", "/sys", "/sys", "--dev", "/dev"]
    for dev in sorted(Path("/dev").glob("nvidia*")) + [Path("/dev/dri")]:  # a GPU grading machine
        args += ["--dev-bind-try", str(dev), str(dev)]
    return args


def sandbox_env(scratch: Path, extra: dict[str, str]) -> dict[str, str]:
    """The kernel's whole environment: a few harmless variables, the scratch folder as home and temp."""
    work = str(scratch / "work")
    env = {k: os.environ[k] for k in KEPT_ENV if k in os.environ}
    env.update({k: v for k, v in extra.items() if k.startswith("JPY_") or k in KEPT_ENV})
    env.update(PATH=os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
               HOME=work, TMPDIR="/tmp", USER="learner", LOGNAME="learner", MPLCONFIGDIR=work,
               XDG_CACHE_HOME=work, XDG_CONFIG_HOME=work, XDG_RUNTIME_DIR="/tmp",
               PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(helpers_root()))
    return env


def bwrap_command(kernel_cmd: list[str], scratch: Path, course_root: Path, env: dict[str, str],
                  tmp_mb: int = 0) -> list[str]:
    """``kernel_cmd`` wrapped in bubblewrap; ``scratch`` (holding ``work/``) is the only writable folder of the host.

    ``/tmp`` and ``/dev/shm`` are tmpfs mounts of ``tmp_mb`` MiB each, in the sandbox's memory (0: ``/tmp`` is the
    host folder ``scratch/tmp`` and ``/dev/shm`` bubblewrap's own, with no size of their own). Raises
    SandboxUnavailable when no sandbox can run here, or when the mount list would expose the course folder.
    """
    problem = sandbox_problem()
    if problem:
        raise SandboxUnavailable(f"{problem}: learner code is only run in the sandbox; {INSTALL_HINT}")
    visible = readonly_paths()
    exposed = exposed_course_paths(course_root, visible)
    if exposed:
        raise SandboxUnavailable(
            f"the sandbox would show the course folder {course_root}: it lies inside {', '.join(exposed)} "
            "(a virtual environment or Python installed above the course); put the course folder elsewhere")
    for sub in ("work",) if tmp_mb > 0 else ("work", "tmp"):
        (scratch / sub).mkdir(parents=True, exist_ok=True)
    args = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--unshare-net", "--unshare-pid",
            "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "grading", "--proc", "/proc"]
    args += _system_args()
    size = str(tmp_mb * 2**20)
    if tmp_mb > 0:  # bubblewrap's /dev is a tmpfs as large as half the machine's memory: shm sized, the rest read-only
        args += ["--size", size, "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    # /tmp first: the scratch folder may itself lie under /tmp (its mount point is made inside the new /tmp);
    # then the read-only folders, so a venv or course checkout under /tmp is not hidden by the new /tmp
    args += ["--size", size, "--tmpfs", "/tmp"] if tmp_mb > 0 else ["--bind", str(scratch / "tmp"), "/tmp"]
    args += ["--bind", str(scratch), str(scratch)]
    for p in visible:
        args += ["--ro-bind", str(p), str(p)]
    args += ["--chdir", str(scratch / "work"), "--clearenv"]
    for key, value in sorted(sandbox_env(scratch, env).items()):
        args += ["--setenv", key, value]
    return [*args, "--", *kernel_cmd]


#: run in the sandbox: where ``helpers`` is imported from there
_PROBE = "import helpers, os; print(os.path.realpath(helpers.__path__[0]))"


def helpers_in_sandbox(course_root: Path) -> str:
    """Check, before grading anything, that the sandbox imports the grader's own ``helpers``; "" when it does.

    Otherwise one line: which ``helpers`` the grader found, what the sandbox did instead, and what to do. A
    class graded where the sandbox cannot import the checks would end "crashed" submission by submission, for a
    fault of the grader's and not of the learners'.
    """
    import tempfile

    try:
        found = _package_dirs()
        mine = str(found[0]) if found else "none"
        with tempfile.TemporaryDirectory(prefix="grading-probe-") as scratch:
            cmd = bwrap_command([sys.executable, "-c", _PROBE], Path(scratch), Path(course_root), {})
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (SandboxUnavailable, OSError, subprocess.SubprocessError) as err:
        return f"the grader's `helpers` ({mine}) cannot be shown to the sandbox: {err}"
    seen = proc.stdout.strip()
    if proc.returncode == 0 and seen == mine:
        return ""
    why = seen if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return (f"the sandbox does not import the grader's `helpers` ({mine}): {why}. Install the course with "
            "`pip install -e <course folder>` in this environment, or run the grader from the course folder")
