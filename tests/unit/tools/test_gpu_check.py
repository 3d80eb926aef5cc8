"""`make gpu-check` and `make gpu-wheelhouse`, on a machine without a GPU: the refusal, the dry run,
the plan, the results it would write, and each chapter's measurements where a CPU can run them.
The CUDA measurements themselves are `gpu` tests: the check runs them on the GPU machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers import results
from course_tools.gpu_check import measure, run, wheelhouse

from support.layout import ROOT  # noqa: E402
PROVENANCE = {"device": "Test GPU 9000", "driver": "999.1", "torch": "2.11.0+cu130", "cuda": "13.0",
              "python": "3.12.3", "date": "2026-12-01T10:00:00+00:00", "command": "make gpu-check"}
CPU = torch.device("cpu")


def test_without_cuda_it_refuses_at_once_and_says_why(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # so it refuses on a GPU machine too
    monkeypatch.setattr(run.subprocess, "run", lambda *a, **k: pytest.fail(f"ran {a} although it should refuse"))
    assert run.main([]) == 2
    err = capsys.readouterr().err
    assert "refused: no CUDA GPU here" in err and "--dry-run" in err


def test_the_dry_run_lists_every_step_and_runs_none(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(run.subprocess, "run", lambda *a, **k: pytest.fail(f"the dry run ran {a}"))
    assert run.main(["--dry-run", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for needed in ["-m helpers env", "-m helpers bench", "-m gpu", "--nbval", "COURSE_DEVICE=cuda", "solutions",
                   "--no-deps", *[f"measure {ch}" for ch in measure.MEASURES], f"within {run.BUDGET_S} s"]:
        assert needed in out, needed
    assert not list(tmp_path.iterdir()), "a dry run writes nothing"


def test_a_rehearsal_never_writes_into_results(capsys):
    with pytest.raises(SystemExit):
        run.main(["--rehearse"])
    assert "never results/" in capsys.readouterr().err


def test_the_plan_installs_carried_wheels_first_and_ends_with_the_notebooks(tmp_path):
    (tmp_path / "nbval-0.11.0-py2.py3-none-any.whl").write_bytes(b"")
    steps = run.plan("python3", tmp_path, tmp_path / "work")
    assert steps[0].name == "install carried wheels" and "--no-deps" in steps[0].argv
    assert "--no-index" in steps[0].argv and str(tmp_path / "nbval-0.11.0-py2.py3-none-any.whl") in steps[0].argv
    assert steps[-1].name == "solutions under nbval" and steps[-1].env["COURSE_DEVICE"] == "cuda"
    assert run.plan("python3", tmp_path / "none", tmp_path)[0].name == "install the course (--no-deps)"


def test_the_gpu_tests_it_runs_are_the_files_with_gpu_marks():
    files = run.gpu_test_files()
    assert "tests/unit/helpers/test_memory.py" in files and "tests/unit/tools/test_gpu_check.py" in files
    assert "tests/e2e/test_grading.py" not in files  # no gpu test there, and it imports nbgrader


JUNIT = """<testsuites><testsuite>
<testcase classname="solutions.01_why_gpus.01_why_gpus.ipynb" name="Cell 1" file="solutions/01_why_gpus/01_why_gpus.ipynb"/>
<testcase classname="x" name="Cell 2" file="solutions/01_why_gpus/01_why_gpus.ipynb"><failure message="boom"/></testcase>
<testcase classname="x" name="Cell 1" file="solutions/03_memory/03_memory.ipynb"/>
<testcase classname="x" name="t" file="tests/unit/helpers/test_memory.py"><skipped message="needs a CUDA GPU"/></testcase>
</testsuite></testsuites>"""


def test_results_carry_the_measurements_reports_outcomes_and_provenance(tmp_path):
    work, out, logs = tmp_path / "work", tmp_path / "results", tmp_path / "logs"
    work.mkdir(), logs.mkdir()
    (work / "nbval.xml").write_text(JUNIT)
    (work / "01_why_gpus.json").write_text(json.dumps({"figures": {"gpu_matmul_best": 5e13}, "skipped": {}}))
    (logs / "env.log").write_text("torch 2.11.0+cu130, 1 GPU")
    written = run.write_results(work, out, PROVENANCE, logs)
    assert sorted(p.stem for p in written) == sorted(results.FIGURES)
    ch01 = results.load(out / "test-gpu-9000" / "01_why_gpus.json")
    assert ch01.figures["gpu_matmul_best"].value == 5e13 and ch01.provenance == PROVENANCE
    assert "step failed or did not run" in ch01.skipped["speedup_largest"]  # missing, never made up
    assert json.loads((out / "test-gpu-9000" / "01_why_gpus.json").read_text())["checks"]["notebook"] == "failed 1 of 2"
    assert results.load(out / "test-gpu-9000" / "02_devices.json").figures["env_report"].value.startswith("torch")


def test_junit_outcomes_per_notebook(tmp_path):
    (tmp_path / "r.xml").write_text(JUNIT)
    outcomes = run.junit_outcomes(tmp_path / "r.xml")
    assert outcomes["solutions/03_memory/03_memory.ipynb"] == "passed 1"
    assert outcomes["tests/unit/helpers/test_memory.py"] == "skipped 1"  # a skipped gpu test is not a passed one
    assert run.junit_outcomes(tmp_path / "missing.xml") == {}


# --------------------------------------------------------------------------- the measurements


def test_every_chapter_with_stored_figures_has_a_measurement_or_a_report():
    reported = {"02_devices"}  # env_report comes from `python -m helpers env`
    assert set(measure.MEASURES) | reported == set(results.FIGURES)


def test_the_matmul_sweep_measures_on_any_device():
    figures, skipped = measure.measure_01(CPU, **measure.REHEARSAL["01_why_gpus"])
    produced = set(figures) | set(skipped)
    assert produced == set(results.FIGURES["01_why_gpus"]) - {"bench_report"}
    assert figures["gpu_copy_bandwidth"] > 0
    # on a busy machine no size may be steady enough to name the best: then it says so instead of a number
    assert figures.get("gpu_matmul_best", 1) > 0 and ("gpu_matmul_best" in figures) != ("gpu_matmul_best" in skipped)


def test_the_sweep_names_no_best_size_when_no_size_is_steady(monkeypatch):
    """The busy-machine case, forced: every row too noisy, so the best size is skipped with the reason."""
    from helpers import benchmark as bench

    monkeypatch.setattr(bench.Table, "best", lambda self, key, threshold=0.1: None)
    figures, skipped = measure.measure_01(CPU, **measure.REHEARSAL["01_why_gpus"])
    assert {"cpu_matmul_best", "gpu_matmul_best", "gpu_matmul_best_n"} <= set(skipped) and "gpu_matmul_best" not in figures
    assert "steadily" in skipped["gpu_matmul_best"]


def test_the_precision_step_measures_on_any_device():
    figures, skipped = measure.measure_05(CPU, **measure.REHEARSAL["05_mixed_precision"])
    assert set(figures) == set(results.FIGURES["05_mixed_precision"]) and not skipped
    assert all(v > 0 for v in figures.values())


def test_the_speed_chapter_measures_its_cpu_figures_and_names_each_cuda_one_it_skips():
    """Chapter 08 at rehearsal sizes on the CPU: its loops (the quiet one is the solution cell, read from
    solutions/), torch.compile where a compiler exists, the optimizers and attention; streams, CUDA graphs and
    cuDNN skipped, each with its reason."""
    figures, skipped = measure.measure_08(CPU, **measure.REHEARSAL["08_speed"])
    assert set(figures) | set(skipped) == set(results.FIGURES["08_speed"]) and not set(figures) & set(skipped)
    assert {"loop_noisy_step", "loop_quiet_step", "adamw_fused", "sdpa", "naive_attention"} <= set(figures)
    assert all(v > 0 for k, v in figures.items() if k != "compile_s")
    assert {"streams_side_stream", "overlap_side_stream", "compile_small_reduce_overhead", "cudnn_benchmark_on"} <= set(skipped)
    assert all("ran on cpu" in why for key, why in skipped.items() if key.startswith(("streams_", "cudnn_")))


def test_the_stored_08_figures_describe_the_sizes_measure_08_and_the_cells_use():
    """helpers.results.WORKLOADS is the one place chapter 08's GPU sizes are written: the figures' descriptions
    name them, measure_08 takes them from there, and the chapter's cells use the same numbers (review 2, finding
    10: the descriptions named a workload nothing measured)."""
    import inspect
    import string

    from support.layout import load, solution_path

    w = results.WORKLOADS["08_speed"]
    fields = {name for _, what in results.FIGURES["08_speed"].values()
              for _, name, _, _ in string.Formatter().parse(what) if name}
    assert fields and fields <= set(w), fields - set(w)
    assert "{" not in "".join(results.describe("08_speed", key) for key in results.FIGURES["08_speed"])
    source = inspect.getsource(measure.measure_08)
    assert [key for key in w if f'w["{key}"]' not in source] == []
    cells = "\n".join(c.source for c in load(solution_path("08_speed")).cells if c.cell_type == "code")
    shape = ", ".join
    expected = [
        f"def make_run(batches=20, batch={w['loop_batch']}, width={w['loop_width']},",
        f"torch.randn({w['stream_rows']}, 1024).pin_memory() for _ in range({w['stream_batches']})",
        f"torch.randn({w['compile_batch']}, {w['features']}, device=device)",
        f"for _ in range({w['chain_layers']}) for layer in (nn.Linear({w['chain_width']}, {w['chain_width']}), nn.GELU())",
        f"torch.randn({w['small_batch']}, {w['chain_width']}, device=device)",
        f"nn.Linear({w['optimizer_width']}, {w['optimizer_width']}) for _ in range({w['optimizer_layers']})",
        f"torch.randn({shape(map(str, w['attention_shape']))}, device=device",
        f"nn.Conv2d({w['conv_in']}, {w['conv_out']}, 3, padding=1)",
        f"torch.randn({shape(map(str, w['conv_shape']))}, device=device)",
        f"torch.randn({shape(map(str, w['new_conv_shape']))}, device=device)",
    ]
    assert [text for text in expected if text not in cells] == []


def test_the_fast_step_chapter_measures_every_rung_on_any_device():
    """Chapter 09 at rehearsal sizes on the CPU: the peaks, the step's FLOPs and every rung of the ladder (the
    compiled one where a compiler exists, else skipped with the reason)."""
    figures, skipped = measure.measure_09(CPU, **measure.REHEARSAL["09_fast_step"])
    assert set(figures) | set(skipped) == set(results.FIGURES["09_fast_step"]) and not set(figures) & set(skipped)
    assert {"peak_fp32", "peak_16bit", "step_flops", "step_plain_fp32", "step_sdpa", "utilisation_best"} <= set(figures)
    assert all(v > 0 for k, v in figures.items() if k != "compile_s")


def test_the_stored_09_figures_describe_the_sizes_measure_09_and_the_cells_use():
    """helpers.results.WORKLOADS is the one place chapter 09's GPU sizes are written: its figures name them,
    measure_09 and the chapter's cells read them from there, and every rung of the ladder has its figure."""
    import inspect
    import string

    from support.layout import load, solution_path
    from helpers import ladder

    w = results.WORKLOADS["09_fast_step"]
    fields = {name for _, what in results.FIGURES["09_fast_step"].values()
              for _, name, _, _ in string.Formatter().parse(what) if name}
    assert fields and fields <= set(w), fields - set(w)
    source = inspect.getsource(measure.measure_09)
    assert [key for key in w if f'w["{key}"]' not in source] == []
    cells = "\n".join(c.source for c in load(solution_path("09_fast_step")).cells if c.cell_type == "code")
    assert 'results.WORKLOADS["09_fast_step"] if on_cuda' in cells
    rungs = {f"step_{ladder.slug(r.name)}" for r in ladder.ladder(torch.bfloat16)}
    assert rungs <= set(results.FIGURES["09_fast_step"])


def test_the_kernels_chapter_measures_on_any_device():
    """Chapter 10 at rehearsal sizes on the CPU: both roofs, the softmax eager, fused and compiled; the Triton
    kernel only where it is compiled for a GPU (its interpreter's time says nothing), skipped with the reason."""
    figures, skipped = measure.measure_10(CPU, **measure.REHEARSAL["10_kernels"])
    assert set(figures) | set(skipped) == set(results.FIGURES["10_kernels"]) and not set(figures) & set(skipped)
    assert {"copy_bytes_per_s", "add_bytes_per_s", "peak_fp32", "softmax_eager_s", "softmax_torch_s"} <= set(figures)
    assert all(v > 0 for v in figures.values())
    assert "softmax_triton_s" in skipped and skipped["softmax_triton_s"]


def test_the_kernel_gpu_check_times_is_the_reference_solution():
    """measure_10 times the solution notebook's own softmax_rows (the one place it is written), run here through
    Triton's interpreter."""
    pytest.importorskip("triton", reason="Triton installs on Linux x86-64 only")
    from helpers import kernels

    triton, tl, _state = kernels.setup(CPU)
    softmax_rows = measure._reference_softmax(triton, tl)
    x = torch.randn(5, 300)[:, :250]
    torch.testing.assert_close(softmax_rows(x), torch.softmax(x, dim=1))


def test_the_stored_10_figures_describe_the_sizes_measure_10_and_the_cells_use():
    """WORKLOADS holds chapter 10's GPU sizes once: its figures name them, measure_10 and the cells read them."""
    import inspect
    import string

    from support.layout import load, solution_path

    w = results.WORKLOADS["10_kernels"]
    fields = {name for _, what in results.FIGURES["10_kernels"].values()
              for _, name, _, _ in string.Formatter().parse(what) if name}
    assert fields and fields <= set(w), fields - set(w)
    source = inspect.getsource(measure.measure_10)
    assert [key for key in w if f'w["{key}"]' not in source] == []
    cells = "\n".join(c.source for c in load(solution_path("10_kernels")).cells if c.cell_type == "code")
    assert [key for key in w if f'sizes["{key}"]' not in cells] == []


def test_the_quiet_loop_it_measures_is_the_reference_solution():
    source = measure._solution_source("08_speed", "train-quietly")
    assert "def train_quietly(" in source and "### BEGIN SOLUTION" in source
    with pytest.raises(LookupError, match="no-such-exercise"):
        measure._solution_source("08_speed", "no-such-exercise")


@pytest.mark.parametrize("chapter", ["03_memory", "04_dataloader", "07_troubleshooting"])
def test_cuda_only_figures_are_skipped_with_a_reason_off_cuda(chapter):
    figures, skipped = measure.MEASURES[chapter](CPU)
    assert figures == {} and set(skipped) == set(results.FIGURES[chapter])
    assert all("ran on cpu" in why for why in skipped.values())


@pytest.mark.gpu
@pytest.mark.parametrize("chapter", ["03_memory", "04_dataloader", "06_multi_gpu", "07_troubleshooting", "08_speed",
                                     "09_fast_step", "10_kernels"])
def test_cuda_measurements_produce_every_figure(chapter):
    figures, skipped = measure.MEASURES[chapter](torch.device("cuda"))
    assert set(figures) == set(results.FIGURES[chapter]), skipped
    if chapter == "03_memory":
        assert figures["reserved_after_free"] >= 64 * 2**20 > figures["allocated_after_free"]
        assert "out of memory" in figures["oom_message"].lower()
    if chapter == "07_troubleshooting":
        assert "device-side assert" in figures["device_assert_message"]


def test_a_measurement_runs_in_its_own_process_and_writes_json(tmp_path):
    out = tmp_path / "06.json"
    done = subprocess.run([sys.executable, "-m", "course_tools.gpu_check.measure", "06_multi_gpu", str(out), "cpu"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text()) == {"figures": {"gpu_count": 0}, "skipped": {}}
    bad = subprocess.run([sys.executable, "-m", "course_tools.gpu_check.measure", "99_nope", str(out)],
                         capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and "usage" in bad.stderr


# --------------------------------------------------------------------------- the wheelhouse


def test_the_wheelhouse_leaves_out_what_the_gpu_machine_has(tmp_path):
    for name in ("nbval-0.11.0-py2.py3-none-any.whl", "pytest-9.2.0-py3-none-any.whl",
                 "typing_extensions-4.15.0-py3-none-any.whl", "jupyter_client-8.10.0-py3-none-any.whl"):
        (tmp_path / name).write_bytes(b"")
    dropped = wheelhouse.prune(tmp_path)
    assert sorted(wheelhouse.project_of(w) for w in dropped) == ["pytest", "typing-extensions"]
    assert sorted(p.name for p in tmp_path.iterdir())[0].startswith("jupyter_client")


def test_the_wheelhouse_targets_the_gpu_machines_python():
    cmd = wheelhouse.download_command(Path("/tmp/w"))
    assert cmd[cmd.index("--python-version") + 1] == "3.12" and "--only-binary=:all:" in cmd
    assert "manylinux_2_28_x86_64" in cmd and set(wheelhouse.NEEDED) <= set(cmd)


def test_a_gpu_without_bf16_or_tf32_tensor_cores_skips_those_figures_with_the_reason(monkeypatch):
    """A T4 (7.5) only emulates bf16 and has no TF32: its figures would measure the emulation."""
    from helpers import amp

    monkeypatch.setattr(measure, "_cuda", lambda device: True)
    monkeypatch.setattr(amp, "low_precision_units", lambda device: {"fp16 tensor cores": True,
                                                                   "bf16 tensor cores": False,
                                                                   "tf32 tensor cores": False})
    figures, skipped = measure.measure_05(CPU, **measure.REHEARSAL["05_mixed_precision"])
    assert set(skipped) == {"step_bf16", "peak_bf16", "matmul_bf16", "matmul_fp32_tf32"}
    assert set(figures) | set(skipped) == set(results.FIGURES["05_mixed_precision"])
    assert "emulated" in skipped["matmul_bf16"]
