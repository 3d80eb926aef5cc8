"""helpers.datasheet: the vendor's dense peaks, found by the name torch reports, and only where a sheet was read."""

import pytest

from helpers import datasheet


@pytest.mark.parametrize("name, part", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"), ("NVIDIA H100 NVL", "H100 NVL"),
    ("NVIDIA H200", "H200 SXM"), ("NVIDIA A100-SXM4-80GB", "A100"), ("NVIDIA A100 80GB PCIe", "A100"),
    ("Tesla T4", "T4"), ("NVIDIA L4", "L4"), ("NVIDIA L40S", "L40S"), ("NVIDIA A10", "A10"),
    ("Tesla V100-SXM2-16GB", "V100 SXM2"), ("Tesla V100-PCIE-32GB", "V100 PCIe"),
])
def test_a_gpu_is_found_by_the_name_torch_reports(name, part):
    assert datasheet.lookup(name).part == part


@pytest.mark.parametrize("name", [None, "", "cpu", "NVIDIA A10G", "NVIDIA GeForce RTX 4090", "AMD Instinct MI300X"])
def test_a_part_whose_sheet_was_not_read_has_none(name):
    assert datasheet.lookup(name) is None


def test_mfu_is_quoted_against_the_16_bit_tensor_core_peak_as_palm_and_nanogpt_do():
    assert datasheet.lookup("NVIDIA A100-SXM4-40GB").training_peak == ("bfloat16", 312e12)  # nanoGPT's figure
    assert datasheet.lookup("Tesla T4").training_peak == ("float16", 65e12)  # Turing: no bfloat16
    assert datasheet.lookup("Tesla T4").peak("tf32") is None


def test_the_sheets_agree_with_the_simulated_gpus_figures():
    """The simulated H100 and T4 (tests/support/gpu_model.py) cite the same datasheets: one must not drift."""
    from support import gpu_model

    for profile, name in ((gpu_model.H100_SXM, "NVIDIA H100 80GB HBM3"), (gpu_model.T4, "Tesla T4")):
        sheet = datasheet.lookup(name)
        for kind, figure in (("float32", profile.fp32), ("tf32", profile.tf32), ("bfloat16", profile.bf16),
                             ("float16", profile.fp16)):
            if sheet.peak(kind) is not None:
                assert figure.value == pytest.approx(sheet.peak(kind)), (name, kind)
        assert profile.memory_bandwidth.value == pytest.approx(sheet.bandwidth), (name, "bandwidth")


@pytest.mark.parametrize("name, bandwidth, printed", [
    ("NVIDIA H100 80GB HBM3", 3.35e12, "3.35 TB/s"), ("NVIDIA H100 PCIe", 2.0e12, "2 TB/s"),
    ("NVIDIA H100 NVL", 3.9e12, "3.9 TB/s"), ("NVIDIA H200", 4.8e12, "4.8 TB/s"),
    ("NVIDIA H200 NVL", 4.8e12, "4.8 TB/s"), ("NVIDIA A100-SXM4-80GB", 2.039e12, "2,039 GB/s"),
    ("NVIDIA L40S", 864e9, "864 GB/s"), ("NVIDIA L4", 300e9, "300 GB/s"),
    ("NVIDIA A10", 600e9, "600 GB/s"), ("Tesla T4", 320e9, "320 GB/s"), ("Tesla V100-SXM2-16GB", 900e9, "900 GB/s"),
    ("Tesla V100-PCIE-32GB", 900e9, "900 GB/s"),
])
def test_each_sheet_has_its_memory_bandwidth_in_bytes_per_second_and_cites_it(name, bandwidth, printed):
    sheet = datasheet.lookup(name)
    assert sheet.bandwidth == pytest.approx(bandwidth)
    assert f"memory bandwidth {printed}" in sheet.source


def test_every_sheet_has_a_bandwidth_and_the_a100_names_its_column():
    assert all(sheet.bandwidth for _, sheet in datasheet.SHEETS)
    assert "80GB SXM column" in datasheet.lookup("NVIDIA A100-SXM4-40GB").source  # one pattern, several parts


def test_a_sheet_made_without_a_bandwidth_still_is_one():
    """Sheet(part, source, peaks) as before the bandwidth: a caller of the old form is not broken."""
    sheet = datasheet.Sheet("X", "a sheet", {"float32": 1e12})
    assert sheet.bandwidth is None and sheet.training_peak == ("float32", 1e12)
