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
