"""One fake machine: what torch reports about CUDA, MPS and the accelerator, for grading on a CPU.

Device logic (which device to pick, whether to synchronise, whether to pin
memory) depends only on what a program *asks* about the machine. A
:class:`FakeMachine` describes the answers (how many CUDA GPUs, whether there
is MPS, what torch was built for, how much memory a GPU has) and
:meth:`FakeMachine.active` makes torch give them while a check runs. No
tensor can really be created on a faked device. Every other stand-in (the
simulated GPU of chapter 01, the CPU-only laptop) is built from this one
description, through :func:`helpers.checks.patching.patched`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from helpers.checks.patching import Change, patched

__all__ = ["FakeMachine", "cpu_only_machine", "fake_machine"]

NOT_COMPILED = "Torch not compiled with CUDA enabled"
NO_ACCELERATOR = "Cannot access accelerator device when none is available."
NO_MPS = "Cannot execute deviceSynchronize() without MPS backend."


def _returns(value: Any):
    return lambda *args, **kwargs: value


def _raises(exc_type: type[BaseException], message: str):
    def fail(*args: Any, **kwargs: Any) -> None:
        raise exc_type(message)

    return fail


@dataclass(frozen=True)
class FakeMachine:
    """What the machine reports: ``cuda`` GPUs, an MPS device, the build, GPU memory.

    ``built_for`` is the accelerator torch was compiled for ("cuda", "mps" or
    None); by default the one the machine has. ``FakeMachine(built_for="cuda")``
    is a CUDA build of torch on a machine without a GPU: then
    ``torch.accelerator.current_accelerator()`` names CUDA although
    ``is_available()`` is False, as real torch does.
    """

    cuda: int = 0
    mps: bool = False
    built_for: str | None = None
    gpu_memory: int = 80 * 2**30
    #: the GPU ``torch.cuda.set_device`` chose last while the machine is active (0 on each activation)
    current: list[int] = field(default_factory=lambda: [0], compare=False, repr=False)

    @property
    def build(self) -> str | None:
        if self.built_for is not None:
            return self.built_for
        return "cuda" if self.cuda else "mps" if self.mps else None

    @property
    def accelerator(self) -> torch.device | None:
        """The available accelerator, as ``torch.accelerator.current_accelerator(check_available=True)``."""
        return torch.device("cuda", 0) if self.cuda else torch.device("mps") if self.mps else None

    def _built_device(self) -> torch.device | None:
        build = self.build
        return None if build is None else torch.device(build, 0) if build == "cuda" else torch.device(build)

    def _current_index(self) -> int:
        if self.accelerator is None:
            raise RuntimeError(NO_ACCELERATOR)
        return self.current[0]

    def _set_device(self, device: Any) -> None:
        """``torch.cuda.set_device``: an index the machine lacks fails with CUDA's words."""
        index = device if isinstance(device, int) else torch.device(device).index
        if index is None:
            raise ValueError(f"Expected a cuda device with a specified index or an integer, but got: {device}")
        if index < 0:  # torch.cuda.set_device(-1) does nothing
            return
        if index >= self.cuda:
            raise RuntimeError("CUDA error: invalid device ordinal")
        self.current[0] = index

    def _current_accelerator(self, check_available: bool = False) -> torch.device | None:
        return self.accelerator if check_available else self._built_device()

    def _device_name(self, device: Any = None) -> str:
        return f"Simulated GPU {getattr(device, 'index', device) or 0}"

    def _properties(self, device: Any = None) -> Any:
        from types import SimpleNamespace

        return SimpleNamespace(name=self._device_name(device), total_memory=self.gpu_memory, major=9, minor=0,
                               multi_processor_count=132, L2_cache_size=50 * 2**20)  # an H100's figures

    def changes(self) -> list[Change]:
        """The (owner, attribute, fake) triples that make torch describe this machine."""
        cuda, mps = self.cuda, self.mps
        no_cuda = _raises(AssertionError, NOT_COMPILED) if self.build != "cuda" else \
            _raises(RuntimeError, "No CUDA GPUs are available")
        changes: list[Change] = [
            (torch.cuda, "is_available", _returns(cuda > 0)),
            (torch.cuda, "device_count", _returns(cuda)),
            (torch.cuda, "current_device", self._current_index if cuda else no_cuda),
            (torch.cuda, "set_device", self._set_device if cuda else no_cuda),
            (torch.cuda, "is_initialized", _returns(cuda > 0)),
            (torch.cuda, "get_device_name", self._device_name if cuda else no_cuda),
            (torch.cuda, "get_device_properties", self._properties if cuda else no_cuda),
            (torch.cuda, "mem_get_info", _returns((self.gpu_memory, self.gpu_memory)) if cuda else no_cuda),
            (torch.cuda, "synchronize", _returns(None) if cuda else no_cuda),
            (torch.backends.cuda, "is_built", _returns(cuda > 0 or self.build == "cuda")),
            (torch.backends.mps, "is_available", _returns(mps)),
            (torch.backends.mps, "is_built", _returns(mps or self.build == "mps")),
            (torch.mps, "synchronize", _returns(None) if mps else _raises(RuntimeError, NO_MPS)),
        ]
        if hasattr(torch, "accelerator"):
            accel = self.accelerator
            changes += [
                (torch.accelerator, "is_available", _returns(accel is not None)),
                (torch.accelerator, "current_accelerator", self._current_accelerator),
                (torch.accelerator, "device_count", _returns(cuda if cuda else int(mps))),
                (torch.accelerator, "current_device_index", self._current_index),
                (torch.accelerator, "current_device_idx", self._current_index),
                (torch.accelerator, "synchronize",
                 _returns(None) if accel is not None else _raises(RuntimeError, NO_ACCELERATOR)),
            ]
        return changes

    @contextlib.contextmanager
    def active(self, extra: Iterable[Change] = (), namespaces: Iterable[dict] = ()) -> Iterator["FakeMachine"]:
        """Make torch describe this machine while the block runs; ``extra`` changes ride along."""
        self.current[0] = 0
        with patched([*self.changes(), *extra], namespaces):
            yield self


@contextlib.contextmanager
def fake_machine(cuda: int = 0, mps: bool = False, built_for: str | None = None) -> Iterator[FakeMachine]:
    """Shorthand for ``FakeMachine(cuda, mps, built_for).active()``."""
    with FakeMachine(cuda=cuda, mps=mps, built_for=built_for).active() as machine:
        yield machine


def cpu_only_machine() -> contextlib.AbstractContextManager[FakeMachine]:
    """A laptop with a CPU-only build of torch, on any machine (a GPU grader included)."""
    return FakeMachine().active()
