"""The grading kernel: started under the per-process memory cap and, by default, in the bubblewrap sandbox.

The caps themselves are ``course_tools.grading.settings.GradingLimits`` (the table there says which part of the
engine enforces each). Why ``RLIMIT_DATA`` and not ``RLIMIT_AS``: the address-space limit also counts shared
libraries and the huge reservations a CUDA context makes, so a cap low enough to stop a memory bomb would stop
``import torch`` on a GPU machine; the data limit counts what a program actually allocates (heap, anonymous maps).
It caps host memory only, never GPU memory (Linux only; elsewhere no memory cap is applied and
``memory_cap_supported()`` says so). It holds one process; the whole submission's processes together are held by
``watchdog.CellWatch`` (the same ``memory_mb``).

``scratch_mb`` caps its scratch space: the sandbox's ``/tmp`` and ``/dev/shm`` are tmpfs mounts of that size, and
``RLIMIT_FSIZE`` stops any one file it (or a process it starts) writes at that size, in its working folder too,
which must stay a folder of the host: the grader reads back from it what a grade cell needs. Python ignores
``SIGXFSZ``, so the write fails with ``OSError: [Errno 27] File too large`` in the learner's cell.
"""

from __future__ import annotations

import subprocess
import sys

import os
import shutil
import tempfile
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, Integer, Unicode

__all__ = ["CappedKernelManager", "memory_cap_supported"]


def memory_cap_supported() -> bool:
    """True where the kernel's memory can be capped (Linux: ``RLIMIT_DATA``)."""
    return sys.platform.startswith("linux")


def _cap(data_bytes: int, file_bytes: int) -> None:
    """Runs in the kernel process before it starts (``preexec_fn``): its memory and the size of a file it writes."""
    import resource

    if data_bytes:
        resource.setrlimit(resource.RLIMIT_DATA, (data_bytes, data_bytes))
    if file_bytes:
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))


class CappedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernels cannot allocate more than ``memory_mb`` and run in the sandbox.

    With ``sandboxed`` the kernel runs under bubblewrap (``course_tools.grading.engine.sandbox``)
    in a scratch folder of its own, which also holds its connection file and
    sockets, and is deleted with the kernel.
    """

    memory_mb = Integer(0, help="Memory cap of the kernel in MiB (0: none).").tag(config=True)
    scratch_mb = Integer(0, help="The sandbox's /tmp and /dev/shm, and the largest file the kernel writes, in MiB "
                                 "(0: none).").tag(config=True)
    sandboxed = Bool(False, help="Run the kernel under bubblewrap.").tag(config=True)
    course_root = Unicode("", help="The course folder the sandbox must hide.").tag(config=True)
    scratch = Unicode("", help="The kernel's scratch folder (set when sandboxed).")

    def use_sandbox(self) -> None:
        """Give the kernel a scratch folder, with the connection over Unix sockets inside it."""
        self.sandboxed = True
        self.scratch = tempfile.mkdtemp(prefix="grading-kernel-")
        self.transport = "ipc"
        self.ip = os.path.join(self.scratch, "kernel")
        self.connection_file = os.path.join(self.scratch, "kernel.json")

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        if memory_cap_supported() and (self.memory_mb > 0 or self.scratch_mb > 0):
            data, files = max(self.memory_mb, 0) * 2**20, max(self.scratch_mb, 0) * 2**20
            kw["preexec_fn"] = lambda: _cap(data, files)
        if self.sandboxed:
            from course_tools.grading.engine.sandbox import bwrap_command

            scratch = Path(self.scratch)
            _copy_folder(Path(kw.get("cwd") or os.getcwd()), scratch / "work")
            kernel_cmd = bwrap_command(list(kernel_cmd), scratch, Path(self.course_root or os.getcwd()),
                                       dict(kw.get("env") or {}), tmp_mb=self.scratch_mb)
            kw["env"] = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
            kw["cwd"] = str(scratch)
            if hasattr(sys.stderr, "fileno") and _isatty(sys.stderr):  # no terminal inside (TIOCSTI)
                kw["stdout"] = kw["stderr"] = subprocess.DEVNULL
        return await super()._async_launch_kernel(kernel_cmd, **kw)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if self.scratch and not restart:
            shutil.rmtree(self.scratch, ignore_errors=True)

    cleanup_resources = _async_cleanup_resources


def _isatty(stream) -> bool:
    try:
        return os.isatty(stream.fileno())
    except (OSError, ValueError):
        return False


def _copy_folder(src: Path, dest: Path, max_bytes: int = 64 * 2**20) -> None:
    """The learner's own files (the submission folder, as nbgrader copied it) into the scratch folder."""
    dest.mkdir(parents=True, exist_ok=True)
    if not src.is_dir():
        return
    for item in src.iterdir():
        if item.is_file() and not item.is_symlink() and item.stat().st_size <= max_bytes:
            shutil.copy2(item, dest / item.name)
