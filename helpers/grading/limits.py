"""Limits on one submission while it is graded, so one learner cannot stall or break a class.

Four caps, all set in ``nbgrader_config.py``:

=====================  ===========================================  ==================================
cap                    setting                                      enforced by
=====================  ===========================================  ==================================
time per cell          ``c.Execute.timeout`` (s)                    nbgrader: interrupts the kernel
time per notebook      ``c.GradingLimits.notebook_timeout`` (s)     ``helpers.grading.grade``: kills the
                                                                    whole autograde process tree
memory of the kernel   ``c.GradingLimits.memory_mb``                ``RLIMIT_DATA`` in the kernel process:
                                                                    an allocation past it raises MemoryError
output per cell        ``c.GradingLimits.output_kb``                ``LimitedExecute``: output past it is
                                                                    dropped while it arrives, never stored
=====================  ===========================================  ==================================

Why ``RLIMIT_DATA`` and not ``RLIMIT_AS``: the address-space limit also counts
shared libraries and the huge reservations a CUDA context makes, so a cap low
enough to stop a memory bomb would stop ``import torch`` on a GPU machine;
the data limit counts what a program actually allocates (heap, anonymous
maps). It caps host memory only, never GPU memory (Linux only; elsewhere no
memory cap is applied and ``memory_cap_supported()`` says so).

Why the output cap is applied while output arrives: nbgrader's own
``LimitOutput`` trims a cell after it ran, by which time a flood has already
been held in the grader's memory.
"""

from __future__ import annotations

import json
import sys

from jupyter_client.manager import AsyncKernelManager
from nbformat.v4 import new_output
from traitlets import Integer
from traitlets.config import Configurable

from nbgrader.preprocessors import Execute

__all__ = [
    "GradingLimits",
    "CappedKernelManager",
    "LimitedExecute",
    "OUTPUT_CUT_MARK",
    "memory_cap_supported",
]

#: Start of the note that replaces output past the cap; ``helpers.grading.status`` looks for it.
OUTPUT_CUT_MARK = "[grading: output cut"


class GradingLimits(Configurable):
    """The caps an instructor sets in ``nbgrader_config.py`` (``c.GradingLimits.*``)."""

    notebook_timeout = Integer(
        900, help="Seconds one submission may take in all (every notebook, kernel start included)."
    ).tag(config=True)
    memory_mb = Integer(4096, help="Memory one grading kernel may allocate, in MiB (0: no cap).").tag(config=True)
    output_kb = Integer(256, help="Output one cell may produce, in KiB; the rest is dropped (0: no cap).").tag(
        config=True
    )


def memory_cap_supported() -> bool:
    """True where the kernel's memory can be capped (Linux: ``RLIMIT_DATA``)."""
    return sys.platform.startswith("linux")


def _cap_memory(limit_bytes: int) -> None:
    """Runs in the kernel process before it starts (``preexec_fn``)."""
    import resource

    resource.setrlimit(resource.RLIMIT_DATA, (limit_bytes, limit_bytes))


class CappedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernels cannot allocate more than ``memory_mb``."""

    memory_mb = Integer(0, help="Memory cap of the kernel in MiB (0: none).").tag(config=True)

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        if self.memory_mb > 0 and memory_cap_supported():
            limit = self.memory_mb * 2**20
            kw["preexec_fn"] = lambda: _cap_memory(limit)
        return await super()._async_launch_kernel(kernel_cmd, **kw)


def _size(msg) -> int:
    """Bytes an output message would add to the notebook (close enough to count a flood)."""
    content = msg.get("content", {})
    if msg.get("msg_type") == "stream":
        return len(content.get("text", ""))
    return len(json.dumps(content.get("data", content), default=str))


class LimitedExecute(Execute):
    """nbgrader's ``Execute`` with the memory and output caps of ``GradingLimits``.

    Error outputs are always kept (shortened if huge): they are the evidence of
    what happened to the cell.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", CappedKernelManager)
        super().__init__(*args, **kwargs)
        self.limits = GradingLimits(config=self.config)
        self._emitted: dict[int, int] = {}

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        if isinstance(km, CappedKernelManager):
            km.memory_mb = self.limits.memory_mb
        return km

    def preprocess(self, nb, resources=None, km=None):
        self._emitted = {}  # counts are per notebook: cell indices repeat across notebooks
        return super().preprocess(nb, resources, km=km)

    def output(self, outs, msg, display_id, cell_index):
        cap = self.limits.output_kb * 1024
        if cap <= 0:
            return super().output(outs, msg, display_id, cell_index)
        if msg.get("msg_type") == "error":
            content = msg["content"]
            content["evalue"] = content.get("evalue", "")[:cap]
            content["traceback"] = [line[:cap] for line in content.get("traceback", [])[:200]]
            return super().output(outs, msg, display_id, cell_index)
        used = self._emitted.get(cell_index, 0)
        size = _size(msg)
        self._emitted[cell_index] = used + size
        if used + size <= cap:
            return super().output(outs, msg, display_id, cell_index)
        if used <= cap:  # first output past the cap: keep what fits, say so, once
            if msg.get("msg_type") == "stream" and used < cap:
                msg["content"]["text"] = msg["content"]["text"][: cap - used]
                super().output(outs, msg, display_id, cell_index)
            # Not a stream output: nbgrader's LimitOutput runs after this and drops every stream
            # output past its first 1000 lines, so after a flood of short lines a stream note
            # vanished and nobody learned that output was cut. It keeps other outputs.
            note = new_output(
                "display_data",
                data={"text/plain": f"{OUTPUT_CUT_MARK}: this cell printed more than {self.limits.output_kb} KiB;"
                                    " the rest is not kept]"},
            )
            outs.append(note)
            return note
        return None
