"""Real GPU results, stored with where they came from, for readers who have no GPU.

A chapter measures everything it shows on the reader's machine. A section that needs a GPU cannot do
that on a laptop, so it may show what a real GPU measured instead, but only a figure that a real run
of ``make gpu-check`` wrote, with the device, driver, torch and CUDA versions, the date and the command
stored beside it (``results/<gpu>/<chapter>.json``). Nothing here makes a number up: with no stored
file a chapter says so and shows nothing in its place.

:data:`FIGURES` is the one list of what may be stored and shown, chapter by chapter: ``make gpu-check``
writes exactly these keys (``course_tools.gpu_check.measure``), and :func:`show` refuses any other, so a
chapter cannot display a figure that no run produces. Ground floor: no torch, no other helper but
``units`` and ``i18n``.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers.i18n import N_, _
from helpers.units import format_bytes, format_rate, format_seconds

SCHEMA = 1
#: What a results file must say about the run that produced it. Without every one of these it is refused.
PROVENANCE_FIELDS = ("device", "driver", "torch", "cuda", "python", "date", "command")

#: chapter -> figure key -> (unit, what it is). Units: "s", "FLOP/s", "B/s", "B", "x" (a ratio), "%" (a share),
#: "n" (a size), "FLOP" (a count of operations), "text" (a message or report, shown verbatim). What it is is shown
#: to the learner: marked with ``N_``,
#: translated where it is shown.
FIGURES: dict[str, dict[str, tuple[str, str]]] = {
    "02_devices": {
        "env_report": ("text", N_("`python -m helpers env` on the GPU machine")),
    },
    "01_why_gpus": {
        "cpu_matmul_best": ("FLOP/s", N_("float32 matrix product, best of the sweep, on that machine's CPU")),
        "gpu_matmul_best": ("FLOP/s", N_("float32 matrix product, best of the sweep, on the GPU")),
        "gpu_matmul_best_n": ("n", N_("size n of the GPU's best matrix product")),
        "speedup_smallest": ("x", N_("GPU speed over CPU speed at the smallest size of the sweep (n=16)")),
        "speedup_largest": ("x", N_("GPU speed over CPU speed at the largest size of the sweep (n=2048)")),
        "crossover_n": ("n", N_("size from which the GPU beats the CPU beyond the noise at every larger size")),
        "gpu_call_floor": ("s", N_("one call of the cheapest GPU operation (add 1 to one number)")),
        "gpu_copy_bandwidth": ("B/s", N_("bytes per second of a plain device copy, n=8192 float32")),
        "gpu_add_bandwidth": ("B/s", N_("bytes per second of an element-wise add, n=8192 float32")),
        "bench_report": ("text", N_("`python -m helpers bench` on the GPU machine")),
    },
    "03_memory": {
        "allocated_after_alloc": ("B", N_("memory_allocated() after a 64 MiB tensor is made")),
        "reserved_after_alloc": ("B", N_("memory_reserved() then")),
        "allocated_after_free": ("B", N_("memory_allocated() after `del x`")),
        "reserved_after_free": ("B", N_("memory_reserved() after `del x`: the cache keeps the block")),
        "reserved_after_empty_cache": ("B", N_("memory_reserved() after torch.cuda.empty_cache()")),
        "oom_message": ("text", N_("a real torch.OutOfMemoryError message (asking for more than the whole GPU)")),
    },
    "04_dataloader": {
        "h2d_pageable_bandwidth": ("B/s", N_("host-to-GPU copy of 64 MiB from ordinary (pageable) memory")),
        "h2d_pinned_bandwidth": ("B/s", N_("the same copy from pinned memory")),
        "h2d_blocking_call": ("s", N_("time for .to(cuda) of pinned 64 MiB to return (waits for the copy)")),
        "h2d_nonblocking_call": ("s", N_("time for .to(cuda, non_blocking=True) of pinned 64 MiB to return")),
    },
    "05_mixed_precision": {
        "step_fp32": ("s", N_("one Adam step of chapter 05's GPU model (MLP 1024-4096-4096-1, batch 4096), float32")),
        "step_bf16": ("s", N_("the same step under bfloat16 autocast")),
        "step_fp16_scaler": ("s", N_("the same step under float16 autocast with a GradScaler")),
        "matmul_fp32_ieee": ("FLOP/s", N_("float32 matrix product n=8192, full float32 (TF32 off)")),
        "matmul_fp32_tf32": ("FLOP/s", N_("the same product with TF32 allowed")),
        "matmul_bf16": ("FLOP/s", N_("the same product in bfloat16")),
        "peak_fp32": ("B", N_("peak memory of the float32 step")),
        "peak_bf16": ("B", N_("peak memory of the bfloat16 autocast step")),
    },
    "06_multi_gpu": {
        "gpu_count": ("n", N_("GPUs on the machine that ran the check")),
    },
    "07_troubleshooting": {
        "device_assert_message": ("text", N_("a real device-side assert: index 10 into 10 classes, in a child "
                                             "process")),
    },
    "08_speed": {
        "loop_noisy_step": ("s", N_("one step of chapter 08's train_noisily (3 host syncs a step): Linear(64, width), "
                                    "ReLU, Linear(width, 10), batch {loop_batch}, the width sized so the GPU's time "
                                    "per step is about the host's")),
        "loop_quiet_step": ("s", N_("one step of the same loop with every host read after the loop")),
        "loop_width": ("n", N_("the width the GPU run chose for those two steps (device time about host time)")),
        "streams_one_stream": ("s", N_("{stream_batches} pinned ({stream_rows}, 1024) float32 batches copied and "
                                       "computed on one stream (speed.copy_and_compute)")),
        "streams_side_stream": ("s", N_("the same with each next batch copied on a side stream")),
        "overlap_one_stream": ("%", N_("share of the copies' time during which a kernel ran, one stream (from a "
                                       "trace)")),
        "overlap_side_stream": ("%", N_("the same share with the side stream")),
        "compile_s": ("s", N_("compiling bias_gelu_norm (bias, GELU, normalisation) on ({compile_batch}, {features}) "
                              "float32: the first call less a steady call")),
        "compile_eager": ("s", N_("one call of bias_gelu_norm on ({compile_batch}, {features}), eager")),
        "compile_compiled": ("s", N_("the same call, torch.compile (default mode)")),
        "compile_small_eager": ("s", N_("one call of {chain_layers} x (Linear({chain_width}, {chain_width}) + GELU), "
                                        "batch {small_batch}, no_grad, eager")),
        "compile_small_default": ("s", N_("the same, torch.compile (default mode)")),
        "compile_small_reduce_overhead": ("s", N_("the same, torch.compile(mode=\"reduce-overhead\"): CUDA graphs")),
        "small_kernels_eager": ("n", N_("kernels the GPU ran per call of that chain, eager (from a trace)")),
        "small_kernels_default": ("n", N_("the same count, torch.compile (default mode)")),
        "small_kernels_reduce_overhead": ("n", N_("the same count, reduce-overhead")),
        "small_launches_eager": ("n", N_("launches the host made per call of that chain (kernel launches and CUDA "
                                         "graph replays), eager")),
        "small_launches_default": ("n", N_("the same count, torch.compile (default mode)")),
        "small_launches_reduce_overhead": ("n", N_("the same count, reduce-overhead")),
        "adamw_foreach": ("s", N_("one AdamW step over {optimizer_layers} Linear({optimizer_width}, "
                                  "{optimizer_width}) layers, foreach=True")),
        "adamw_fused": ("s", N_("the same step, fused=True")),
        "conv_block_nchw_16bit": ("s", N_("Conv2d({conv_in}, {conv_out}, 3) + BatchNorm2d + ReLU on {conv_shape}, "
                                          "NCHW, under autocast in the GPU's 16-bit dtype")),
        "conv_block_channels_last_16bit": ("s", N_("the same block and input in channels_last")),
        "sdpa": ("s", N_("F.scaled_dot_product_attention, q/k/v of shape {attention_shape} in the GPU's 16-bit "
                         "dtype (bfloat16, float16 on a GPU older than compute capability 8.0)")),
        "naive_attention": ("s", N_("softmax(q k^T / sqrt(d)) v written out, the same shapes and dtype")),
        "cudnn_benchmark_off": ("s", N_("Conv2d({conv_in}, {conv_out}, 3) on {conv_shape}, cudnn.benchmark off")),
        "cudnn_benchmark_on": ("s", N_("the same convolution, cudnn.benchmark on")),
        "cudnn_benchmark_new_shape_off": ("s", N_("the first call on a new shape {new_conv_shape} with cudnn.benchmark "
                                                  "off: a plan from cuDNN's heuristics, no search")),
        "cudnn_benchmark_new_shape": ("s", N_("the first call on the same new shape with cudnn.benchmark on: the "
                                              "algorithm search included")),
    },
    "09_fast_step": {
        "peak_fp32": ("FLOP/s", N_("float32 matrix product, best of chapter 01's sweep (n = {peak_sizes}), on the GPU")),
        "peak_tf32": ("FLOP/s", N_("the same float32 sweep with TF32 allowed (set_float32_matmul_precision(\"high\"))")),
        "peak_16bit": ("FLOP/s", N_("the same sweep in the GPU's 16-bit dtype (amp.pick_dtype)")),
        "step_flops": ("FLOP", N_("FLOPs of one training step of ladder.Block (dim {dim}), {batch} sequences of {tokens} "
                                  "token ids, forward and backward (FlopCounterMode)")),
        "step_plain_fp32": ("s", N_("one such training step, plain float32 (.item() each step, pageable batches, "
                                    "torch's default AdamW, attention written out)")),
        "step_sync_free": ("s", N_("the same step, losses read once after the epoch")),
        "step_fed_loader": ("s", N_("and a loader with pinned memory, {workers} workers, prefetch, non_blocking "
                                    "copies")),
        "step_tf32": ("s", N_("and TF32 for float32 products (set_float32_matmul_precision(\"high\"))")),
        "step_autocast": ("s", N_("and autocast in the GPU's 16-bit dtype (a GradScaler where float16)")),
        "step_fused_adamw": ("s", N_("and AdamW(fused=True)")),
        "step_sdpa": ("s", N_("and F.scaled_dot_product_attention")),
        "step_compiled": ("s", N_("and torch.compile of the model (forward and backward)")),
        "utilisation_best": ("%", N_("the fastest rung's achieved FLOP/s over the best measured peak (of any format)")),
        "mfu_best": ("%", N_("the fastest rung's MFU: its achieved FLOP/s over the datasheet's dense 16-bit peak "
                             "(helpers.datasheet, a vendor figure)")),
        "compile_s": ("s", N_("compiling the block, forward and backward: the first epoch less a steady one")),
    },
    "10_kernels": {
        "copy_bytes_per_s": ("B/s", N_("a device copy of {copy_mib} MiB of float32, read and write counted")),
        "add_bytes_per_s": ("B/s", N_("c = a + b on {copy_mib} MiB tensors, two reads and a write counted")),
        "peak_fp32": ("FLOP/s", N_("float32 matrix product, best of chapter 01's sweep (n = {peak_sizes})")),
        "softmax_eager_s": ("s", N_("softmax over each row of a ({rows}, {cols}) float32 tensor, written as five "
                                    "eager operations")),
        "softmax_torch_s": ("s", N_("the same softmax, torch.softmax (one fused kernel)")),
        "softmax_compiled_s": ("s", N_("the five operations under torch.compile")),
        "softmax_triton_s": ("s", N_("the Triton kernel of exercise 2 (the reference answer), compiled")),
        "softmax_triton_share": ("%", N_("that kernel's bytes per second (x read once, the output written once) over "
                                         "the copy's")),
    },
}

#: The sizes behind a chapter's stored figures, as its cells and its measure (``course_tools.gpu_check.measure``)
#: run them. The descriptions above name them through these placeholders and ``measure_<NN>`` takes its sizes from
#: here, so a description cannot drift from what was measured (tests/unit/helpers/test_results.py keeps them equal).
WORKLOADS: dict[str, dict[str, Any]] = {
    "08_speed": {
        "loop_batch": 256, "loop_width": 512,  # train_noisily's classifier (on a GPU the width is sized at run time)
        "stream_batches": 8, "stream_rows": 4096,
        "compile_batch": 256, "features": 4096,  # bias_gelu_norm
        "small_batch": 8, "chain_layers": 16, "chain_width": 1024,  # the CUDA-graphs demo: kernels no fusion removes
        "optimizer_layers": 24, "optimizer_width": 128,
        "attention_shape": (4, 8, 256, 64),
        "conv_in": 32, "conv_out": 64, "conv_shape": (16, 32, 56, 56), "new_conv_shape": (16, 32, 60, 60),
    },
    "09_fast_step": {  # the ladder on a GPU: chapter 09's cells and measure_09
        "dim": 512, "tokens": 256, "batch": 64, "steps": 50, "workers": 2,
        "peak_sizes": (1024, 2048, 4096, 8192),
    },
    "10_kernels": {"copy_mib": 256, "peak_sizes": (1024, 2048, 4096), "rows": 4096, "cols": 4096},
}


def describe(chapter: str, key: str) -> str:
    """What figure ``key`` of ``chapter`` is, translated, with the chapter's workload sizes filled in."""
    return _(FIGURES[chapter][key][1]).format(**WORKLOADS.get(chapter, {}))


class ResultsError(ValueError):
    """A stored results file is not one the course may show (incomplete provenance, unknown figure)."""


@dataclass(frozen=True)
class Figure:
    key: str
    value: Any
    unit: str
    what: str

    def text(self) -> str:
        """The value in the unit a reader takes in at a glance."""
        return format_value(self.value, self.unit)


@dataclass
class StoredResults:
    """One chapter's figures from one real GPU run, and where they came from."""

    chapter: str
    provenance: dict[str, str]
    figures: dict[str, Figure]
    skipped: dict[str, str] = field(default_factory=dict)
    path: Path | None = None

    @property
    def device(self) -> str:
        return self.provenance["device"]

    def label(self) -> str:
        """The line shown beside every stored figure: the device, versions, date and command."""
        p = self.provenance
        return _("measured on {device}, torch {torch} (CUDA {cuda}, driver {driver}), Python {python}, {date}, by "
                 "`{command}`").format(device=p["device"], torch=p["torch"], cuda=p["cuda"], driver=p["driver"],
                                       python=p["python"], date=p["date"][:10], command=p["command"])


def format_value(value: Any, unit: str) -> str:
    """One stored value as text, by its unit."""
    if value is None:
        return "-"
    if unit == "s":
        return format_seconds(value)
    if unit in ("FLOP/s", "B/s"):
        return format_rate(value, unit)
    if unit == "B":
        return format_bytes(value)
    if unit == "x":
        return _("{ratio}x").format(ratio=f"{value:.3g}")
    if unit == "%":
        return f"{value:.0%}"
    if unit == "FLOP":
        return format_rate(value, "FLOP")
    return str(value)


def slug(device_name: str) -> str:
    """``"NVIDIA H200"`` -> ``"nvidia-h200"``: the folder one GPU's results live in."""
    return re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-") or "unknown-gpu"


# --------------------------------------------------------------------------- finding and reading


def results_dir() -> Path | None:
    """Where the stored results are: ``$COURSE_RESULTS``, else a ``results/`` folder beside the helpers
    (a checkout) or in the working folder or one of its parents (a notebook in ``notebooks/NN/``)."""
    if os.environ.get("COURSE_RESULTS"):
        return Path(os.environ["COURSE_RESULTS"])
    here = Path(__file__).resolve().parents[1]
    for base in [here, *[Path.cwd(), *Path.cwd().parents]]:
        candidate = base / "results"
        if candidate.is_dir():
            return candidate
    return None


def parse(data: dict[str, Any], path: Path | None = None) -> StoredResults:
    """Validate one results file's content; refuse it, naming what is wrong, unless the course may show it."""
    where = f"{path}: " if path else ""
    chapter = data.get("chapter")
    if data.get("schema") != SCHEMA:
        raise ResultsError(f"{where}schema {data.get('schema')!r}, expected {SCHEMA}; rerun `make gpu-check`")
    if chapter not in FIGURES:
        raise ResultsError(f"{where}unknown chapter {chapter!r}; chapters with stored figures: {sorted(FIGURES)}")
    provenance = data.get("provenance") or {}
    missing = [f for f in PROVENANCE_FIELDS if not str(provenance.get(f) or "").strip()]
    if missing:
        raise ResultsError(f"{where}no {', '.join(missing)} in its provenance: a figure without the run that "
                           "made it is not shown")
    figures = {}
    for key, entry in (data.get("figures") or {}).items():
        if key not in FIGURES[chapter]:
            raise ResultsError(f"{where}figure {key!r} is not one chapter {chapter} stores (helpers.results.FIGURES)")
        unit, what = FIGURES[chapter][key]
        if entry.get("unit") != unit:
            raise ResultsError(f"{where}figure {key!r} has unit {entry.get('unit')!r}, expected {unit!r}")
        figures[key] = Figure(key, entry.get("value"), unit, what)
    skipped = {str(k): str(v) for k, v in (data.get("skipped") or {}).items()}
    return StoredResults(chapter, {k: str(v) for k, v in provenance.items()}, figures, skipped, path)


def load(path: Path) -> StoredResults:
    """Read and validate one ``results/<gpu>/<chapter>.json``."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ResultsError(f"{path}: cannot be read ({err})") from err
    return parse(data, Path(path))


def stored(chapter: str, root: Path | None = None) -> list[StoredResults]:
    """Every GPU's stored results for ``chapter``, one per device folder, sorted by device."""
    if chapter not in FIGURES:
        raise ResultsError(f"no stored figures are defined for chapter {chapter!r}: {sorted(FIGURES)}")
    root = root if root is not None else results_dir()
    if root is None:
        return []
    runs = [load(p) for p in sorted(Path(root).glob(f"*/{chapter}.json"))]
    for run in runs:
        if "rehearsal" in run.device.lower():
            raise ResultsError(f"{run.path}: a CPU rehearsal of the check (`--rehearse`), not a GPU result; "
                               "it is never shown: delete it")
    return runs


def write(chapter: str, figures: dict[str, Any], provenance: dict[str, str], root: Path,
          skipped: dict[str, str] | None = None, extra: dict[str, Any] | None = None) -> Path:
    """Store one chapter's figures under ``root/<gpu>/<chapter>.json`` (validated exactly as :func:`load`)."""
    data = {
        "schema": SCHEMA,
        "chapter": chapter,
        "provenance": provenance,
        "figures": {k: {"value": v, "unit": FIGURES.get(chapter, {}).get(k, ("?",))[0]} for k, v in figures.items()},
        "skipped": skipped or {},
        **(extra or {}),
    }
    parse(data)
    path = Path(root) / slug(provenance["device"]) / f"{chapter}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    return path


# --------------------------------------------------------------------------- showing


def report(chapter: str, keys: list[str], mine: dict[str, Any] | None = None, *,
           mine_label: str = N_("this machine"), root: Path | None = None) -> str:
    """Stored GPU figures ``keys`` of ``chapter`` beside the reader's own (``mine``: key -> value), as text.

    Every stored column is headed by its device and followed by its provenance line. With nothing stored
    the text says so, and why no number stands in for it.
    """
    return _text(chapter, keys, mine or {}, mine_label, _runs_for(chapter, keys, mine, root))


def _runs_for(chapter: str, keys: list[str], mine: dict[str, Any] | None, root: Path | None) -> list[StoredResults]:
    """The stored runs of ``chapter``, once every figure asked for is known to be one a run stores."""
    unknown = [k for k in [*keys, *(mine or {})] if k not in FIGURES.get(chapter, {})]
    if chapter not in FIGURES or unknown:
        raise ResultsError(f"chapter {chapter!r} stores no figure {unknown}; see helpers.results.FIGURES")
    return stored(chapter, root)


def _text(chapter: str, keys: list[str], mine: dict[str, Any], mine_label: str, runs: list[StoredResults]) -> str:
    if not runs:
        return _("No stored GPU result for {chapter}: this copy of the course holds no figure measured on a real "
                 "GPU (results/ is empty), so there is none to show here, and no number from a data sheet is shown "
                 "in its place. On a machine with a GPU (Colab with a GPU, a workstation) the chapter's own cells measure "
                 "it there.").format(chapter=chapter)
    numbers = [k for k in keys if FIGURES[chapter][k][0] != "text"]
    lines = []
    if numbers:
        header = [_("figure"), *([_(mine_label) if mine_label else ""] if mine else []), *[r.device for r in runs]]
        rows = [[describe(chapter, k), *([format_value(mine.get(k), FIGURES[chapter][k][0])] if mine else []),
                 *[r.figures[k].text() if k in r.figures else f"- ({_skipped(r, k)})" for r in runs]]
                for k in numbers]
        widths = [max(_display_width(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
        lines += ["  ".join(_pad(str(c), w) for c, w in zip(row, widths)).rstrip() for row in [header, *rows]]
    for k in keys:
        if FIGURES[chapter][k][0] == "text":
            for r in runs:
                body = (r.figures[k].value if k in r.figures else
                        _("(not stored: {reason})").format(reason=_skipped(r, k)))
                lines += ["", f"{describe(chapter, k)}, {r.device}:", str(body).rstrip()]
    lines += ["", *[f"{r.device}: {r.label()}" for r in runs]]
    return "\n".join(lines).lstrip("\n")


def _skipped(run: StoredResults, key: str) -> str:
    """Why ``run`` stored no ``key``: the reason the run gave (as it wrote it), else "not measured"."""
    return run.skipped[key] if key in run.skipped else _("not measured")


def _display_width(text: str) -> int:
    """Columns ``text`` takes in a notebook's output: Hangul take two each, so the Korean table stays aligned."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _pad(text: str, width: int) -> str:
    """``text.ljust(width)`` by columns taken rather than characters (:func:`_display_width`)."""
    return text + " " * (width - _display_width(text))


#: Chapter -> the figures whose cell printed the "nothing stored" paragraph in this process (see :func:`show`).
_TOLD_NOTHING_STORED: dict[str, tuple[str, ...]] = {}


def show(chapter: str, keys: list[str], mine: dict[str, Any] | None = None, *,
         mine_label: str = N_("this machine"), root: Path | None = None) -> list[StoredResults]:
    """Print :func:`report` and return the stored runs it used (empty when none is stored).

    With nothing stored, the paragraph that says why is printed once per chapter; a later cell of the same
    chapter says so in one line (a learner reading eight copies of one paragraph learns nothing from the
    eighth).
    """
    runs = _runs_for(chapter, keys, mine, root)
    if not runs and _TOLD_NOTHING_STORED.get(chapter, tuple(keys)) != tuple(keys):
        print(_("No stored GPU result for {chapter} here either (see above).").format(chapter=chapter))
        return runs
    if not runs:  # the cell that told (run again, it replaces its own output) tells again
        _TOLD_NOTHING_STORED[chapter] = tuple(keys)
    print(_text(chapter, keys, mine or {}, mine_label, runs))
    return runs
