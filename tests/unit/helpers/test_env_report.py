"""helpers.env_report and `python -m helpers env`: the report never fails and says what the course will do."""

import subprocess
import sys

import pytest
import torch

from helpers import env_report as machine, processes
from helpers.checks import fake_machine


def test_report_lists_every_line_the_course_promises():
    text = machine.format_report()
    for label in ("torch", "CUDA runtime", "cuDNN", "NVIDIA driver", "CUDA toolkit (nvcc)", "Apple MPS", "CPU",
                  "torch CPU threads", "course device", "Verdict:"):
        assert label in text
    assert torch.__version__ in text


def test_verdict_without_gpu_says_chapters_run_on_cpu():
    with fake_machine():
        report = machine.describe_machine()
    if report.build == "CPU":
        assert report.verdict.startswith("no GPU found: every chapter runs on the CPU")
    assert "skipped" in report.verdict


def test_report_survives_a_forced_missing_device(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cuda:9")
    with fake_machine():
        report = machine.describe_machine()
    assert report.chosen_device.startswith("none: 'cuda:9' was requested")


def test_python_m_helpers_env_is_the_install_smoke_test():
    proc = subprocess.run([sys.executable, "-m", "helpers", "env"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Verdict:" in proc.stdout and "torch" in proc.stdout


def test_unknown_command_prints_usage_and_fails():
    proc = subprocess.run([sys.executable, "-m", "helpers", "nonsense"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "env" in proc.stdout


def test_python_m_helpers_bench_prints_a_measured_table():
    proc = subprocess.run([sys.executable, "-m", "helpers", "bench", "32", "64"], capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.strip().startswith("matmul")]
    assert len(rows) >= 2 and all("FLOP/s" in r for r in rows), proc.stdout


@pytest.mark.parametrize("wheel, driver, says", [
    (None, None, "needs no NVIDIA driver"),
    ("12.8", None, "no NVIDIA driver was found"),
    ("12.8", (12, 8), "compatible"),
    ("12.8", (13, 0), "compatible"),
    ("12.8", (12, 2), "minor-version compatibility"),
    ("13.0", (12, 9), "update the NVIDIA driver"),
])
def test_cuda_compatibility_follows_the_versions(wheel, driver, says):
    assert says in machine.cuda_compatibility(wheel, driver)


def test_the_cuda_driver_version_is_none_or_a_pair():
    found = machine.nvml_cuda_driver_version()
    assert found is None or (len(found) == 2 and found[0] >= 11)
    if not torch.cuda.is_available() and machine.nvml_driver_version() is None:
        assert found is None


def test_busy_factor_is_runnable_processes_per_core_and_never_below_one(monkeypatch):
    monkeypatch.setattr(processes.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(processes.os, "getloadavg", lambda: (8.0, 1.0, 1.0))
    assert processes.busy_factor() == 4.0
    monkeypatch.setattr(processes.os, "getloadavg", lambda: (0.5, 1.0, 1.0))
    assert processes.busy_factor() == 1.0

    def no_load_average():
        raise OSError("not on this system")

    monkeypatch.setattr(processes.os, "getloadavg", no_load_average)
    assert processes.busy_factor() == 1.0
