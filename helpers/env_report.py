"""What this machine offers the course: the report behind ``python -m helpers env``.

Kept apart from ``device.py`` (which *chooses* and *uses* devices) because a
report must never fail: every probe here is guarded, and a probe that cannot
answer says "unknown" instead of raising. Chapter 00 shows the report and
chapter 02 explains each line.
"""

from __future__ import annotations

import ctypes
import os
import platform
import re
import shutil
import subprocess
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from helpers import device as dev
from helpers.i18n import _

__all__ = [
    "GPUInfo",
    "MachineReport",
    "cuda_compatibility",
    "describe_machine",
    "format_report",
    "nvcc_version",
    "nvml_cuda_driver_version",
    "nvml_driver_version",
]


@dataclass
class GPUInfo:
    index: int
    name: str
    capability: str
    memory_gib: float


@dataclass
class MachineReport:
    torch_version: str
    build: str  # "CPU", "CUDA 12.8", "ROCm 6.3"
    cuda_runtime: str | None
    cudnn: str | None
    driver: str | None
    nvcc: str | None
    gpus: list[GPUInfo] = field(default_factory=list)
    mps: bool = False
    cpu_model: str = "unknown"
    cpu_count: int = 1
    torch_threads: int = 1
    cpu_capability: str = "unknown"
    forced_device: str | None = None
    chosen_device: str = "cpu"
    verdict: str = ""


def _nvml(query: Callable[[Any], Any]) -> Any:
    """``query(lib)`` on an initialised NVML (the library nvidia-smi uses), or None where there is none.

    Loaded with ctypes, so the report works without the nvidia-ml-py package; any failure is None
    (the machine report never raises).
    """
    for name in ("libnvidia-ml.so.1", "libnvidia-ml.so", "nvml.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        try:
            if lib.nvmlInit_v2() != 0:
                return None
            try:
                return query(lib)
            finally:
                lib.nvmlShutdown()
        except AttributeError:
            return None
    return None


def nvml_driver_version() -> str | None:
    """The NVIDIA driver version through NVML, or None."""

    def query(lib: Any) -> str | None:
        buf = ctypes.create_string_buffer(96)
        return buf.value.decode() if lib.nvmlSystemGetDriverVersion(buf, ctypes.c_uint(96)) == 0 else None

    return _nvml(query)


def nvml_cuda_driver_version() -> tuple[int, int] | None:
    """The newest CUDA runtime the driver supports, (major, minor), or None without NVML.

    It is what ``nvidia-smi`` prints as "CUDA Version": a property of the
    driver, not of torch (``torch.version.cuda`` is the runtime torch brought).
    """

    def query(lib: Any) -> tuple[int, int] | None:
        value = ctypes.c_int(0)
        if lib.nvmlSystemGetCudaDriverVersion_v2(ctypes.byref(value)) != 0:
            return None
        return value.value // 1000, value.value % 1000 // 10

    return _nvml(query)


def cuda_compatibility(wheel: str | None, driver: tuple[int, int] | None) -> str:
    """Whether a driver that supports CUDA ``driver`` (major, minor) runs torch's CUDA runtime ``wheel`` ("12.8").

    Since CUDA 11 a driver runs every runtime of its own major version
    (minor-version compatibility: NVIDIA's "CUDA Compatibility" guide), with
    features newer than the driver possibly missing; any newer driver runs an
    older runtime (backward compatibility).
    """
    if wheel is None:
        return _("torch has no CUDA runtime (a CPU-only or ROCm build), so it needs no NVIDIA driver")
    if driver is None:
        return _("torch brings the CUDA {wheel} runtime; no NVIDIA driver was found here, so it cannot run "
                 "CUDA").format(wheel=wheel)
    major, minor = (int(part) for part in wheel.split(".")[:2])
    supported = f"{driver[0]}.{driver[1]}"
    if driver >= (major, minor):
        return _("the driver supports CUDA up to {driver}, at least torch's runtime {wheel}: compatible").format(
            driver=supported, wheel=wheel)
    if driver[0] == major:
        return _("the driver supports CUDA up to {driver}, older than torch's runtime {wheel} but the same major "
                 "version: it runs through minor-version compatibility; a feature newer than the driver may need a "
                 "driver update").format(driver=supported, wheel=wheel)
    return _("the driver supports CUDA up to {driver}, an older major version than torch's runtime {wheel}: update "
             "the NVIDIA driver").format(driver=supported, wheel=wheel)


def nvcc_version() -> str | None:
    """The CUDA toolkit's compiler version (``nvcc --version``), or None when no toolkit is installed.

    PyTorch's wheels bring their own CUDA runtime, so nvcc is only needed to
    compile extensions; its version may differ from ``torch.version.cuda``.
    """
    nvcc = shutil.which("nvcc")
    if not nvcc:
        return None
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"release ([\d.]+)", out)
    return match.group(1) if match else out.strip().splitlines()[-1] if out.strip() else None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _build() -> str:
    if getattr(torch.version, "hip", None):
        return f"ROCm {torch.version.hip}"
    if torch.version.cuda:
        return f"CUDA {torch.version.cuda}"
    return "CPU"


def _verdict(report: MachineReport) -> str:
    if report.gpus:
        names = ", ".join(g.name for g in report.gpus)
        return _("CUDA GPU found ({names}): every chapter runs, and GPU-only steps run too.").format(names=names)
    if report.mps:
        return _("Apple GPU (MPS) found: chapters run on it; CUDA-only steps will say they were skipped.")
    if report.build != "CPU":
        return _("torch is built for {build} but no GPU is visible (driver: {driver}): every chapter runs on the CPU; "
                 "GPU-only steps will say they were skipped.").format(build=report.build,
                                                                      driver=report.driver or _("not found"))
    return _("no GPU found: every chapter runs on the CPU; GPU-only steps will say they were skipped.")


def describe_machine() -> MachineReport:
    """Probe torch, the GPUs, the driver and the CPU; never raises."""
    gpus = []
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            gpus.append(GPUInfo(i, props.name, f"{props.major}.{props.minor}", props.total_memory / 2**30))
    cudnn = None
    if torch.backends.cudnn.is_available():
        cudnn = str(torch.backends.cudnn.version())
    try:
        capability = torch.backends.cpu.get_cpu_capability()
    except AttributeError:
        capability = "unknown"
    try:
        chosen = str(dev.pick_device())
    except dev.DeviceUnavailableError as err:
        chosen = _("none: {error}").format(error=err)
    report = MachineReport(
        torch_version=torch.__version__,
        build=_build(),
        cuda_runtime=torch.version.cuda,
        cudnn=cudnn,
        driver=nvml_driver_version(),
        nvcc=nvcc_version(),
        gpus=gpus,
        mps=bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()),
        cpu_model=_cpu_model(),
        cpu_count=os.cpu_count() or 1,
        torch_threads=torch.get_num_threads(),
        cpu_capability=capability,
        forced_device=os.environ.get(dev.DEVICE_ENV_VAR) or None,
        chosen_device=chosen,
    )
    report.verdict = _verdict(report)
    return report


def format_report(report: MachineReport | None = None) -> str:
    """The report as aligned text lines."""
    r = report or describe_machine()
    rows = [
        ("torch", _("{version} ({build} build)").format(version=r.torch_version, build=r.build)),
        (_("CUDA runtime (torch.version.cuda)"), r.cuda_runtime or _("none (CPU-only build)")),
        ("cuDNN", r.cudnn or _("none")),
        (_("NVIDIA driver (NVML)"), r.driver or _("not found")),
        (_("CUDA toolkit (nvcc)"), r.nvcc or _("not installed (only needed to compile extensions)")),
    ]
    if r.gpus:
        for g in r.gpus:
            rows.append((f"GPU {g.index}", _("{name}, compute capability {capability}, {memory:.1f} GiB").format(
                name=g.name, capability=g.capability, memory=g.memory_gib)))
    else:
        rows.append((_("GPUs"), _("none visible")))
    rows += [
        ("Apple MPS", _("available") if r.mps else _("not available")),
        ("CPU", _("{model} ({count} logical cores, {capability})").format(model=r.cpu_model, count=r.cpu_count,
                                                                         capability=r.cpu_capability)),
        (_("torch CPU threads"), str(r.torch_threads)),
        (f"{dev.DEVICE_ENV_VAR}", r.forced_device or _("not set")),
        (_("course device"), r.chosen_device),
    ]
    width = max(_display_width(k) for k, _v in rows)
    lines = [f"{k}{' ' * (width - _display_width(k))}  {v}" for k, v in rows]
    lines.append("")
    lines.append(_("Verdict: {verdict}").format(verdict=r.verdict))
    return "\n".join(lines)


def _display_width(text: str) -> int:
    """Columns ``text`` takes in a terminal or a notebook's output: a Korean label's Hangul take two each, so the
    report's values stay in one column in the Korean edition too."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)
