"""A GPU's datasheet peaks: the vendor's figures, for MFU as the field computes it, always labelled as such.

Everything else the course shows is measured when the cell runs. A datasheet peak cannot be: it is what the
vendor promises for every unit busy at the top clock. It is here because **MFU** (model FLOPs utilisation) is
defined against it: PaLM (Chowdhery et al. 2022, appendix B) divides the model's FLOP/s by "the theoretical
peak", nanoGPT's ``estimate_mfu`` by the A100's promised 312 TFLOP/s of bfloat16. A learner comparing with a
paper or a blog post needs that denominator; chapter 09 shows it *beside* the measured matmul peak (what stas00
calls MAMF, maximum achievable matmul FLOP/s), never in place of it, and prints the source of each figure.

The figures are **dense** ones: NVIDIA's tensor-core headlines since Ampere are "with sparsity" (2:4 structured
sparsity, which a dense training step never uses), twice the dense rate; a sheet that prints only the sparse
figure is halved here, and the source says so. Only GPUs whose sheets were read are listed; any other device
(every CPU) has no entry, and the chapter then leaves MFU out and says why. Ground floor: no torch.

Each sheet also has the part's **memory bandwidth** (bytes/s), the other roof of chapter 10's roofline: shown beside
the bandwidth a copy measured (:func:`helpers.roofline.measure_bandwidth`), labelled as the vendor's, for the same
reason as the peaks. Where one pattern covers parts with different memory (the A100's 40 GB and 80 GB, PCIe and
SXM), the source names the column read.
"""

from __future__ import annotations

import dataclasses
import re

__all__ = ["Sheet", "SHEETS", "lookup"]

TFLOPS = 1e12
GB_S = 1e9  #: the sheets' "GB/s" is decimal: 1e9 bytes per second


@dataclasses.dataclass(frozen=True)
class Sheet:
    """One GPU's dense peaks by format, from its vendor's datasheet."""

    part: str  #: the datasheet's name for the part (the column read)
    source: str  #: the document, and how a figure was derived from it
    peaks: dict[str, float]  #: "float32" (no tensor cores), "tf32", "bfloat16", "float16" -> dense FLOP/s
    #: GPU memory bandwidth, bytes/s (the sheet's "GPU memory bandwidth"); last, and optional, so a sheet made
    #: as ``Sheet(part, source, peaks)`` still is one
    bandwidth: float | None = None

    def peak(self, kind: str) -> float | None:
        """The dense peak of ``kind`` ("float32", "tf32", "bfloat16", "float16"), None where the part has none."""
        return self.peaks.get(kind)

    @property
    def training_peak(self) -> tuple[str, float]:
        """The peak MFU is quoted against: the 16-bit tensor-core format a step trains in (bfloat16, else
        float16; float32 on a part with neither), as PaLM and nanoGPT do."""
        for kind in ("bfloat16", "float16", "tf32", "float32"):
            if kind in self.peaks:
                return kind, self.peaks[kind]
        raise ValueError(f"{self.part}: a sheet without peaks")


def _sheet(part: str, source: str, *, fp32: float, tf32: float | None = None, bf16: float | None = None,
           fp16: float | None = None, gb_s: float | None = None, bandwidth_source: str = "") -> Sheet:
    """A sheet from its figures as printed: TFLOPS and GB/s; ``bandwidth_source`` extends ``source``."""
    peaks = {"float32": fp32, "tf32": tf32, "bfloat16": bf16, "float16": fp16}
    if gb_s is not None:
        tb_s = gb_s / 1000  # as the sheet prints it: "3.35TB/s", but "2,039GB/s"
        printed = f"{tb_s:g} TB/s" if gb_s >= 1000 and round(tb_s, 2) == tb_s else f"{gb_s:,g} GB/s"
        source += f"; GPU memory bandwidth {printed}{bandwidth_source}"
    return Sheet(part, source, {k: v * TFLOPS for k, v in peaks.items() if v is not None},
                 None if gb_s is None else gb_s * GB_S)


_HALVED = "; tensor-core figures are half the sheet's 'with sparsity' ones"
#: (pattern on torch.cuda.get_device_name(), sheet), first match wins: the PCIe and NVL parts before the SXM one.
SHEETS: list[tuple[re.Pattern[str], Sheet]] = [
    (re.compile(r"H100.*(PCIe|PCIE)"), _sheet("H100 PCIe", "NVIDIA H100 Tensor Core GPU datasheet, H100 PCIe column"
                                              + _HALVED, fp32=51, tf32=378, bf16=756, fp16=756, gb_s=2000)),
    (re.compile(r"H100.*NVL"), _sheet("H100 NVL", "NVIDIA H100 Tensor Core GPU datasheet, H100 NVL column" + _HALVED,
                                      fp32=60, tf32=417.5, bf16=835.5, fp16=835.5, gb_s=3900)),
    (re.compile(r"H100"), _sheet("H100 SXM", "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column" + _HALVED,
                                 fp32=67, tf32=494.5, bf16=989.5, fp16=989.5, gb_s=3350)),
    (re.compile(r"H200.*NVL"), _sheet("H200 NVL", "NVIDIA H200 Tensor Core GPU datasheet, H200 NVL column" + _HALVED,
                                      fp32=60, tf32=417.5, bf16=835.5, fp16=835.5, gb_s=4800)),
    (re.compile(r"H200"), _sheet("H200 SXM", "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column" + _HALVED,
                                 fp32=67, tf32=494.5, bf16=989.5, fp16=989.5, gb_s=4800)),
    (re.compile(r"A100"), _sheet("A100", "NVIDIA A100 Tensor Core GPU datasheet (dense figures, the sheet's first)",
                                 fp32=19.5, tf32=156, bf16=312, fp16=312, gb_s=2039,
                                 bandwidth_source=" (the 80GB SXM column: the 40GB and 80GB PCIe parts have less)")),
    (re.compile(r"L40S"), _sheet("L40S", "NVIDIA L40S datasheet" + _HALVED, fp32=91.6, tf32=183, bf16=362.05,
                                 fp16=362.05, gb_s=864)),
    (re.compile(r"\bL4\b"), _sheet("L4", "NVIDIA L4 Tensor Core GPU datasheet" + _HALVED, fp32=30.3, tf32=60,
                                   bf16=121, fp16=121, gb_s=300)),
    (re.compile(r"\bA10\b"), _sheet("A10", "NVIDIA A10 Tensor Core GPU datasheet (dense figures, the sheet's first)",
                                    fp32=31.2, tf32=62.5, bf16=125, fp16=125, gb_s=600)),
    (re.compile(r"\bT4\b"), _sheet("T4", "NVIDIA T4 Tensor Core GPU datasheet: single precision, and mixed precision "
                                   "(FP16/FP32) on tensor cores; Turing has no TF32 and no bfloat16 units",
                                   fp32=8.1, fp16=65, gb_s=320)),
    (re.compile(r"V100.*(PCIe|PCIE)"), _sheet("V100 PCIe", "NVIDIA V100 Tensor Core GPU datasheet, V100 PCIe column "
                                              "(tensor performance: FP16 in, FP32 accumulate)", fp32=14, fp16=112,
                                              gb_s=900)),
    (re.compile(r"V100"), _sheet("V100 SXM2", "NVIDIA V100 Tensor Core GPU datasheet, V100 SXM2 column (tensor "
                                 "performance: FP16 in, FP32 accumulate)", fp32=15.7, fp16=125, gb_s=900)),
]


def lookup(device_name: str | None) -> Sheet | None:
    """The datasheet of the GPU ``device_name`` names (``torch.cuda.get_device_name()``), None when unknown.

    None for a CPU and for a GPU whose sheet is not listed here."""
    if not device_name:
        return None
    for pattern, sheet in SHEETS:
        if pattern.search(device_name):
            return sheet
    return None
