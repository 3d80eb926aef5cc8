"""Triton on any machine: compiled on a CUDA GPU, interpreted on a CPU, and a clear message where it is missing.

Chapter 10 teaches writing a kernel: one program per block of elements, the offsets it owns, a mask for the ragged
end, a load, a store. That lesson does not need a GPU to be *read and run*: Triton's interpreter
(``TRITON_INTERPRET=1``) runs a ``@triton.jit`` function on CPU tensors, one program after another in NumPy, with the
same masks, strides and dtypes (bfloat16 included), so a laptop learner writes the same kernel and gets the same
answer, only slower (and no timing of it means anything). This module decides which of the three a machine gets
(:func:`status`), sets the interpreter up *before* a kernel is decorated (:func:`setup`: ``triton.jit`` reads
``TRITON_INTERPRET`` when it decorates, not when the kernel is launched, on Triton 3.6 and 3.9 alike; ``triton``
imported earlier, as ``torch._dynamo`` does, is fine: :func:`setup` rebuilds ``triton.language``'s own jitted
functions for the mode it chose), and gives stand-ins where Triton is not installed (it ships wheels for Linux on
x86-64 only), so the chapter's cells still define their kernels and only launching one says why it cannot run.

:func:`generated_code` shows the other way to a kernel: what ``torch.compile``'s inductor writes for a function
(Triton on a GPU, C++ on a CPU), so the learner sees that a compiler writes the same blocks, masks and loads.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import torch

from helpers.i18n import _
from helpers.speed import compiler_missing

__all__ = ["MODES", "KernelStatus", "TritonMissing", "generated_code", "setup", "status"]

#: the ways a kernel can run here: on the GPU, in Triton's interpreter on the CPU, or not at all
MODES = ("compiled", "interpreted", "missing")
#: the environment variable Triton's ``jit`` reads when it decorates a function
INTERPRET_VAR = "TRITON_INTERPRET"
#: the oldest GPUs Triton compiles for (Volta, compute capability 7.0)
MIN_CAPABILITY = (7, 0)


@dataclasses.dataclass(frozen=True)
class KernelStatus:
    """How this machine runs a Triton kernel, and why: what the chapter prints before its first kernel."""

    #: "compiled" (a CUDA GPU), "interpreted" (Triton's interpreter, on the CPU) or "missing" (no Triton, or tensors
    #: with no memory behind them, as on the course's simulated GPU)
    mode: str
    reason: str  #: one sentence for the learner, in the current language
    device: torch.device  #: where a kernel's tensors live: the GPU when compiled, else the CPU

    @property
    def runs(self) -> bool:
        """Whether a kernel can be launched at all (compiled or interpreted)."""
        return self.mode != "missing"

    def __str__(self) -> str:
        return f"{self.mode} ({self.device}): {self.reason}"


class TritonMissing(RuntimeError):
    """A kernel was launched where Triton is not installed: raised by the stand-ins :func:`setup` returns."""


def _import_triton() -> tuple[Any, Any]:
    import triton  # noqa: PLC0415 - optional: Triton ships for Linux on x86-64 only
    import triton.language as tl  # noqa: PLC0415

    return triton, tl


def _missing_reason() -> str:
    return _("Triton is not installed here (it ships for Linux on x86-64 only), so the cells that launch a kernel "
             "are skipped; the rest of the chapter runs.")


def status(device: str | torch.device) -> KernelStatus:
    """Whether a kernel for ``device`` runs compiled, interpreted or not at all, with the reason in one sentence.

    Compiled only on a CUDA device whose driver Triton can really use: torch may say a GPU is there (the course's
    simulated GPU says so, with no driver behind it), so Triton's own driver is asked for the GPU it would compile
    for, and any failure there means the interpreter. Everything is guarded: a question about the machine never
    stops a chapter."""
    device = torch.device(device)
    try:
        triton, _tl = _import_triton()
    except Exception:  # noqa: BLE001 - ImportError, or a broken install: either way there is no Triton
        return KernelStatus("missing", _missing_reason(), torch.device("cpu"))
    cpu = torch.device("cpu")
    if _tensors_are_fake():
        return KernelStatus("missing", _(
            "The tensors here are simulated, with no memory behind them (the course's simulated GPU): a kernel would "
            "have nothing to read, so the kernel cells are skipped."), cpu)
    if device.type != "cuda":
        return KernelStatus("interpreted", _(
            "No CUDA GPU here ({device}): Triton's interpreter runs each kernel on the CPU, one block after another, "
            "with the same results, far more slowly.").format(device=device), cpu)
    problem = _driver_problem(triton, device)
    if problem is not None:
        return KernelStatus("interpreted", problem, cpu)
    return KernelStatus("compiled", _("Triton compiles each kernel for {name}.").format(
        name=torch.cuda.get_device_name(device)), device)


def _tensors_are_fake() -> bool:
    """Whether a tensor made now has no memory behind it (a FakeTensorMode is active, as in the course's simulated
    GPU): Triton's interpreter reads and writes real memory through pointers, so it cannot run there."""
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(torch.empty(0), FakeTensor)


def _driver_problem(triton: Any, device: torch.device) -> str | None:
    """Why Triton cannot compile for the CUDA ``device``, or None when its driver answers for a GPU it supports."""
    try:
        capability = tuple(torch.cuda.get_device_capability(device))
        if capability < MIN_CAPABILITY:
            return _("This GPU (compute capability {cap}) is older than the GPUs Triton compiles for; its interpreter "
                     "runs the kernels on the CPU instead.").format(cap=".".join(map(str, capability)))
        triton.runtime.driver.active.get_current_target()  # loads the real CUDA driver (libcuda)
    except Exception:  # noqa: BLE001 - whatever the driver raised, there is no GPU to compile for
        return _("torch reports a CUDA GPU, but there is no real GPU driver behind it for Triton; its interpreter "
                 "runs the kernels on the CPU instead.")
    return None


def setup(device: str | torch.device) -> tuple[Any, Any, KernelStatus]:
    """``triton``, ``triton.language`` and the :class:`KernelStatus` for ``device``: call it before any ``@triton.jit``.

    Not compiled, it sets ``TRITON_INTERPRET=1`` first, so every function decorated afterwards runs in the
    interpreter (a kernel decorated before stays what it was: run the setup cell, then the kernel's cell);
    compiled, it clears that setting, so a kernel is compiled for the GPU even if an earlier setup in this
    process chose the interpreter. Where Triton is missing it returns stand-ins: ``triton.jit`` still decorates
    (a cell that defines a kernel runs), ``triton.cdiv`` and ``triton.next_power_of_2`` still compute, any
    ``tl.*`` is a placeholder (an annotation such as ``BLOCK: tl.constexpr`` is evaluated when the ``def`` runs),
    and launching or calling a kernel raises :class:`TritonMissing`, saying why."""
    state = status(device)
    if state.mode == "missing":
        return _MissingTriton(state.reason), _Placeholder("triton.language"), state
    if state.mode == "interpreted":
        os.environ[INTERPRET_VAR] = "1"
    else:
        os.environ.pop(INTERPRET_VAR, None)
    triton, tl = _import_triton()
    _language_as(interpreted=state.mode == "interpreted")
    return triton, tl, state


def _language_as(interpreted: bool) -> None:
    """Make ``triton.language``'s own ``@triton.jit`` functions (``tl.max``, ``tl.sum``, ``tl.softmax``...) what a
    kernel decorated now is: interpreted or compiled.

    Why: Triton decides when a function is decorated, and its standard library is decorated when ``triton`` is first
    imported, which ``torch._dynamo`` does long before a chapter's setup cell (any ``torch.compile`` imports it).
    Imported without ``TRITON_INTERPRET``, ``tl.max`` inside an interpreted kernel raises "Cannot call
    @triton.jit'd outside of the scope of a kernel". Each such function is rebuilt from its Python function, once
    per function, in every ``triton.language`` module that holds it."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    wrong, make = (JITFunction, InterpretedFunction) if interpreted else (InterpretedFunction, JITFunction)
    rebuilt: dict[int, Any] = {}
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "triton.language" or name.startswith("triton.language.")):
            continue
        for attr, value in list(vars(module).items()):
            if type(value) is wrong:
                if id(value) not in rebuilt:
                    rebuilt[id(value)] = make(value.fn)
                setattr(module, attr, rebuilt[id(value)])


# --------------------------------------------------------------------------- stand-ins where Triton is missing


class _Placeholder:
    """Anything of ``triton.language`` where Triton is missing: every attribute, call or index is one too."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, name: str) -> "_Placeholder":
        if name.startswith("__"):
            raise AttributeError(name)
        return _Placeholder(f"{self._name}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> "_Placeholder":
        return self

    def __getitem__(self, key: Any) -> "_Placeholder":
        return self

    def __repr__(self) -> str:
        return f"<{self._name}: Triton is not installed>"


class _MissingKernel:
    """What ``triton.jit`` makes where Triton is missing: it keeps the function's name, and refuses to run."""

    def __init__(self, fn: Callable[..., Any], reason: str) -> None:
        functools.update_wrapper(self, fn)
        self._reason = reason

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return self._refuse

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse()

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TritonMissing(_("{name} cannot run: {reason}").format(name=self.__name__, reason=self._reason))


class _MissingTriton:
    """``triton`` where it is missing: ``jit`` decorates, the arithmetic helpers compute, the rest is a placeholder."""

    __name__ = "triton"

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def jit(self, fn: Callable[..., Any] | None = None, **options: Any) -> Any:
        """``@triton.jit`` and ``@triton.jit(...)`` alike."""
        if fn is None:
            return lambda f: _MissingKernel(f, self.reason)
        return _MissingKernel(fn, self.reason)

    def autotune(self, *args: Any, **kwargs: Any) -> Callable[[Any], Any]:
        return lambda kernel: kernel

    heuristics = autotune

    @staticmethod
    def cdiv(x: int, y: int) -> int:
        """``ceil(x / y)`` in integers, as ``triton.cdiv``: the number of blocks of ``y`` that cover ``x``."""
        return (x + y - 1) // y

    @staticmethod
    def next_power_of_2(n: int) -> int:
        """The smallest power of two at least ``n``, as ``triton.next_power_of_2`` (0 for 0)."""
        return 0 if n <= 0 else 1 << (int(n) - 1).bit_length()

    def __getattr__(self, name: str) -> _Placeholder:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Placeholder(f"triton.{name}")

    def __repr__(self) -> str:
        return "<triton: not installed>"


# --------------------------------------------------------------------------- what the compiler writes

#: one kernel of inductor's output: ``name = async_compile.cpp_pybinding([...], r'''<C++>''')`` on a CPU,
#: ``name = async_compile.triton('name', '''<Triton>''', device_str='cuda')`` on a GPU
_KERNEL = re.compile(r"^(\w+) = async_compile\.\w+\(.*?r?'''\n?(.*?)'''", re.DOTALL | re.MULTILINE)


def generated_code(fn: Callable[..., Any], *args: Any) -> str | None:
    """The kernels ``torch.compile`` (inductor) writes for ``fn(*args)``, each headed by its name; None where it cannot.

    Why show it: the learner has just written a kernel by hand, and here is the compiler writing one for the same
    kind of work: on a GPU a ``@triton.jit`` function with the same program id, offsets, mask, load and store (and
    several operations fused into one kernel, one trip to memory); on a CPU a C++ loop. Only the kernels are
    kept: inductor's module around them (imports, buffer allocation, the call that launches them) is plumbing.
    A function inductor runs entirely with library calls (a plain matrix product) has no kernel of its own: its
    ``call`` function, which makes them (``extern_kernels.mm``), is returned instead.

    The device is the first tensor argument's. None where no code can be generated: no compiler for the device
    (:func:`helpers.speed.compiler_missing` says why), or a CUDA device Triton cannot compile for
    (:func:`status` says why: the course's simulated GPU, for one)."""
    from torch._inductor.utils import run_and_get_code  # noqa: PLC0415 - inductor is heavy; imported when asked

    device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
    if compiler_missing(device) is not None:
        return None
    if device.type == "cuda" and status(device).mode != "compiled":
        return None
    _result, sources = run_and_get_code(torch.compile(fn), *args)
    kernels = [f"# {name}\n{body.rstrip()}\n" for source in sources for name, body in _KERNEL.findall(source)]
    if not kernels:  # library calls only: the function that makes them is what there is to read
        kernels = [call for call in map(_call_function, sources) if call]
    return "\n".join(kernels) if kernels else "\n".join(sources)


def _call_function(source: str) -> str:
    """inductor's ``call`` in ``source`` (a function, or a method of its ``Runner`` in newer torch): the lines from
    ``def call(`` to the next line indented no deeper; "" when there is none."""
    lines = source.splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("def call(")), None)
    if start is None:
        return ""
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent):
        end += 1
    return textwrap.dedent("\n".join(lines[start:end])).rstrip() + "\n"
