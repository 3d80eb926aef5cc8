"""helpers.amp, the teaching code of chapter 05: the three training steps, the dtype plan, the autocast
observations and the precision comparison. What grades the chapter is tested in tests/unit/checks/test_checks_ch05.py.

Everything runs on the CPU (CPU autocast supports fp16 and bf16; GradScaler("cpu") works); the
CUDA path has one test marked ``gpu``.
"""

import re
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F

from support.layout import ROOT, load, run_graded_cells, solution_path
from helpers import amp
from helpers import benchmark as bench
from helpers.models import MLP, flat_grads, flat_params, make_regression, set_seed

CHAPTER = "05_mixed_precision"


@pytest.fixture
def deprecations_are_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        warnings.simplefilter("error", FutureWarning)
        yield


def _task(lr=0.1, device="cpu"):
    set_seed(0)
    model = MLP(in_features=8, hidden=16, out_features=1, depth=1).to(device)
    x, y = make_regression(n=64, in_features=8)
    return model, x.to(device), y.to(device), torch.optim.SGD(model.parameters(), lr=lr)


def _true_grads(model, x, y, dtype):
    """The unscaled autocast gradients, computed here without any helper."""
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=dtype):
        loss = F.mse_loss(model(x), y)
    loss.backward()
    grads = flat_grads(model)
    model.zero_grad(set_to_none=True)
    return grads


def test_steps_use_no_deprecated_api(deprecations_are_errors):
    """fp32, autocast and scaler steps (with and without clipping) run with deprecation warnings as errors."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning at all
        model, x, y, opt = _task()
        assert isinstance(amp.fp32_step(model, x, y, F.mse_loss, opt), float)
        assert isinstance(amp.autocast_step(model, x, y, F.mse_loss, opt, "cpu", torch.bfloat16), float)
        for dtype in (torch.float16, torch.bfloat16):
            scaler = torch.amp.GradScaler("cpu")
            assert isinstance(amp.scaled_step(model, x, y, F.mse_loss, opt, scaler, "cpu", dtype), float)
            assert isinstance(amp.scaled_step(model, x, y, F.mse_loss, opt, scaler, "cpu", dtype, max_norm=0.1), float)


def test_module_source_has_no_deprecated_spelling_and_no_private_torch():
    source = (ROOT / "helpers" / "amp.py").read_text()
    assert not re.search(r"torch\.(cuda|cpu)\.amp\.", source)
    assert not re.search(r"torch\.(\w+\.)*_\w+", source), "use torch's public API"


def test_importing_amp_does_not_pay_for_dynamo():
    """`import helpers.amp` stays cheap: torch._dynamo (seconds, cold) is left to the first optimizer."""
    code = "import sys, helpers.amp; print('torch._dynamo' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_chapter_uses_deprecated_api_only_in_the_cell_that_shows_the_warning():
    nb = load(solution_path(CHAPTER))
    cells = [c.source for c in nb.cells if c.cell_type == "code" and re.search(r"torch\.(cuda|cpu)\.amp\.\w+\(", c.source)]
    assert len(cells) == 1 and "catch_warnings(record=True)" in cells[0]
    # every non-demo cell, hidden tests included, in the worker process with deprecations raising
    results = run_graded_cells(nb, warnings_as_errors=("DeprecationWarning", "FutureWarning"))
    assert all(r.passed for r in results.values()), {g: r.message for g, r in results.items() if not r.passed}


def test_chapter_shows_the_raw_calls_before_the_helpers():
    """The dtype choice and the three loops appear in raw torch before amp_plan / compare_precisions run."""
    sources = [c.source for c in load(solution_path(CHAPTER)).cells if c.cell_type == "code"]

    def first(pattern):
        return next(i for i, s in enumerate(sources) if re.search(pattern, s))

    assert first(r"torch\.cuda\.is_bf16_supported\(") < first(r"amp\.amp_plan\(")
    assert first(r"torch\.cpu\.get_capabilities\(") < first(r"amp\.amp_plan\(")
    assert first(r"scaler\.scale\(loss\)\.backward\(\)") < first(r"amp\.compare_precisions\(")
    assert first(r"with torch\.autocast\(device\.type") < first(r"amp\.compare_precisions\(")
    assert not any("amp.flat_" in s or "amp.inject" in s for s in sources)


def test_amp_plan_on_cpu_is_bf16_without_scaler():
    plan = amp.amp_plan("cpu")
    assert (plan.device_type, plan.dtype, plan.use_scaler) == ("cpu", torch.bfloat16, False)
    assert "CPU" in plan.reason
    units = amp.low_precision_units("cpu")
    assert units and all(v in (True, False, None) for v in units.values())


def test_cpu_units_follow_torchs_public_capabilities():
    caps = torch.cpu.get_capabilities()
    units = amp.low_precision_units("cpu")
    if str(caps.get("architecture", "")).startswith(("arm", "aarch")):
        assert units["BF16 instructions (Arm bf16 dot products)"] == caps.get("bf16")
    else:
        assert units["AVX512-BF16 (bf16 dot products)"] == caps["avx512_bf16"]
        assert units["AMX (bf16 matrix tiles)"] == bool(caps["amx_tile"] and caps["amx_bf16"])
        assert ("AMX bf16 matrix units" in amp.amp_plan("cpu").reason) == units["AMX (bf16 matrix tiles)"]


@pytest.mark.gpu
def test_amp_plan_and_scaled_step_on_cuda():
    plan = amp.amp_plan("cuda")
    assert plan.dtype in (torch.bfloat16, torch.float16) and plan.use_scaler == (plan.dtype == torch.float16)
    model, x, y, opt = _task(device="cuda")
    scaler = torch.amp.GradScaler("cuda", enabled=plan.use_scaler)
    losses = [amp.scaled_step(model, x, y, F.mse_loss, opt, scaler, "cuda", plan.dtype) for _ in range(20)]
    assert losses[-1] < losses[0]


def test_scaled_step_skips_inf_and_backs_off():
    model, x, y, opt = _task()
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    before = flat_params(model)
    handle = next(model.parameters()).register_hook(lambda g: torch.full_like(g, float("inf")))
    amp.scaled_step(model, x, y, F.mse_loss, opt, scaler, "cpu", torch.float16)
    handle.remove()
    assert torch.equal(flat_params(model), before)
    assert scaler.get_scale() == 512.0
    amp.scaled_step(model, x, y, F.mse_loss, opt, scaler, "cpu", torch.float16)
    assert not torch.equal(flat_params(model), before)


def test_scaled_step_clips_the_unscaled_gradients():
    model, x, y, opt = _task(lr=0.0)
    true_norm = _true_grads(model, x, y, torch.float16).norm()
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**12)
    amp.scaled_step(model, x, y, F.mse_loss, opt, scaler, "cpu", torch.float16, max_norm=float(true_norm) / 2)
    torch.testing.assert_close(flat_grads(model).norm(), true_norm / 2, rtol=1e-3, atol=0)


def test_autocast_policy_sorts_ops_into_autocasts_lists():
    rows = {r["op"]: r["autocast"] for r in amp.autocast_policy("cpu", torch.bfloat16)}
    assert rows["matmul"] == rows["linear"] == "casts down to bfloat16"
    assert rows["mse_loss"] == "casts up to float32"
    assert rows["relu"] == "follows its inputs"


def test_trace_autocast_keeps_fp32_weights():
    model, x, _, _ = _task()
    rows = amp.trace_autocast(model, x, "cpu", torch.bfloat16)
    first = rows[0]
    assert (first["type"], first["weights"], first["input"], first["output"]) == (
        "Linear", torch.float32, torch.float32, torch.bfloat16)
    assert next(model.parameters()).dtype == torch.float32 and model.training


def test_compare_precisions_measures_each_variant(deprecations_are_errors):
    model_fn = lambda: MLP(in_features=8, hidden=16, out_features=1, depth=1)  # noqa: E731
    x, y = make_regression(n=32, in_features=8)
    results = amp.compare_precisions(model_fn, x, y, F.mse_loss, "cpu", steps=5, variants=("fp32", "bf16"),
                                     min_run_time=0.01)
    assert [r.name for r in results] == ["fp32", "bf16"]
    for r in results:
        assert len(r.losses) == 5 and r.losses[-1] < r.losses[0]
        assert r.step_time.median > 0 and r.peak_bytes > 0
    assert results[0].losses[0] == pytest.approx(results[1].losses[0], rel=0.05)  # same start


def test_scaled_step_works_with_a_disabled_scaler():
    # The chapter's demo passes GradScaler(enabled=False) where the plan needs no scaler (bf16).
    model, x, y, optimizer = _task()
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    before = flat_params(model)
    losses = [amp.scaled_step(model, x, y, F.mse_loss, optimizer, scaler, "cpu", torch.bfloat16, max_norm=1.0)
              for _ in range(5)]
    assert not torch.equal(before, flat_params(model)) and losses[-1] < losses[0]


UNITS_NONE = {"AMX (bf16 matrix tiles)": False, "AMX-FP16": False, "AVX512-BF16 (bf16 dot products)": False,
              "AVX512-FP16 (fp16 vector arithmetic)": False}


def step_times(seconds, name, device="cpu"):
    """A step's timing, measured steadily (1 % apart): what compare_precisions hands the verdict."""
    return bench.Timing.from_times([seconds * f for f in (0.99, 1.0, 1.01)], device, label=name, num_threads=2)


FP32 = step_times(1.0, "fp32")


@pytest.mark.parametrize("units, dtype, says, never", [
    (UNITS_NONE, torch.float16, "converted in software", "AVX512-FP16 vector arithmetic but"),
    ({**UNITS_NONE, "AVX512-FP16 (fp16 vector arithmetic)": True}, torch.float16, "AVX512-FP16 vector arithmetic but",
     "converted in software"),
    ({**UNITS_NONE, "AMX-FP16": True}, torch.float16, "even with AMX-FP16", "converted in software"),
    (UNITS_NONE, torch.bfloat16, "so bf16 is emulated here", "even with"),
    ({**UNITS_NONE, "AVX512-BF16 (bf16 dot products)": True}, torch.bfloat16, "without AMX matrix tiles", "emulated"),
    ({"AMX (bf16 matrix tiles)": None}, torch.bfloat16, "without AMX matrix tiles", "emulated"),  # cannot tell
    ({**UNITS_NONE, "AMX (bf16 matrix tiles)": True}, torch.bfloat16, "even with AMX bf16 tiles", "without AMX"),
])
def test_speed_verdict_for_a_slower_cpu_step_names_only_the_features_the_cpu_reports(units, dtype, says, never):
    text = amp.speed_verdict(step_times(1.5, "low"), FP32, dtype, units)
    assert text.startswith("low takes 1.50x as long as fp32 (") and says in text and never not in text


def test_speed_verdict_is_the_course_rule_and_explains_only_a_difference_beyond_the_noise():
    amx = {**UNITS_NONE, "AMX (bf16 matrix tiles)": True}
    bf16 = step_times(0.5, "bf16")
    assert amp.speed_verdict(bf16, FP32, torch.bfloat16, amx) == (
        f"{bench.compare(bf16, FP32)}: the AMX matrix tiles pay for the casts")
    assert amp.speed_verdict(bf16, FP32, torch.bfloat16, amx).startswith("bf16 is 2.00x faster than fp32 (")
    assert amp.speed_verdict(bf16, FP32, torch.bfloat16, UNITS_NONE).endswith(
        ": the low-precision arithmetic pays for the casts")
    # 5 % apart, steadily: within the noise on this machine, so no conclusion and no explanation
    close = amp.speed_verdict(step_times(1.05, "fp16"), FP32, torch.float16, UNITS_NONE)
    assert close == str(bench.compare(step_times(1.05, "fp16"), FP32)) and "within the noise on this machine" in close
    assert "casts" not in close and "software" not in close
    # 1.5x apart on the medians, but one repeat: too few to know, so nothing is explained either
    once = bench.Timing.from_times([1.5], "cpu", label="fp16", num_threads=2)
    assert "no conclusion" in amp.speed_verdict(once, FP32, torch.float16, UNITS_NONE)
    # 1.5x apart on the medians, but a wide spread: the bands overlap
    wide = bench.Timing.from_times([0.3, 1.5, 2.7], "cpu", label="fp16", num_threads=2)
    assert "within the noise" in amp.speed_verdict(wide, FP32, torch.float16, UNITS_NONE)
    on_gpu = amp.speed_verdict(step_times(1.5, "fp16", "cuda:0"), step_times(1.0, "fp32", "cuda:0"), torch.float16, {})
    assert on_gpu.startswith("fp16 takes 1.50x as long as fp32 (") and "tensor cores" in on_gpu


def test_cpu_units_report_avx512_fp16_from_the_capabilities():
    caps = torch.cpu.get_capabilities()
    units = amp.low_precision_units("cpu")
    if str(caps.get("architecture", "")).startswith(("arm", "aarch")):
        assert "AVX512-FP16 (fp16 vector arithmetic)" not in units  # an x86 feature; Arm lists its own
    else:
        assert units["AVX512-FP16 (fp16 vector arithmetic)"] == caps.get("avx512_fp16")


def test_compare_precisions_prints_nothing_to_stderr(capfd):
    """The CPU profiler warns on fd 2 when the measured step frees older tensors; the gradients are cleared first."""
    model_fn = lambda: MLP(in_features=8, hidden=16, out_features=1, depth=1)  # noqa: E731
    x, y = make_regression(n=32, in_features=8)
    amp.compare_precisions(model_fn, x, y, F.mse_loss, "cpu", steps=2, variants=("fp32", "bf16"), min_run_time=0.01)
    assert "Memory block of unknown size" not in capfd.readouterr().err


# --------------------------------------------------------------------------- the dtype per device, capabilities faked

GPUS = {"H100": (9, 0, 80), "A100": (8, 0, 40), "T4": (7, 5, 15), "V100": (7, 0, 16)}


def fake_gpu(name):
    """One CUDA GPU of ``name``'s compute capability; is_bf16_supported answers as torch does (emulation counts)."""
    from types import SimpleNamespace
    from unittest import mock

    from helpers.checks import FakeMachine

    major, minor, gib = GPUS[name]
    props = lambda device=None: SimpleNamespace(name=name, major=major, minor=minor,  # noqa: E731
                                                total_memory=gib * 2**30, multi_processor_count=40)
    bf16 = lambda including_emulation=True: major >= 8 or including_emulation  # noqa: E731 - a T4 emulates bf16
    return FakeMachine(cuda=1).active(extra=[(torch.cuda, "get_device_properties", props),
                                             (torch.cuda, "is_bf16_supported", mock.Mock(side_effect=bf16))])


@pytest.mark.parametrize("gpu, dtype, scaler, bf16_cores, tf32", [
    ("H100", torch.bfloat16, False, True, True),
    ("A100", torch.bfloat16, False, True, True),
    ("T4", torch.float16, True, False, False),
    ("V100", torch.float16, True, False, False),
])
def test_the_dtype_follows_the_compute_capability(gpu, dtype, scaler, bf16_cores, tf32):
    """bf16 only where it is native (8.0 and newer); a T4 or a V100 gets fp16 with a scaler, and no TF32."""
    with fake_gpu(gpu):
        for device in ("cuda", "cuda:0"):
            assert amp.pick_dtype(device) == dtype
            plan = amp.amp_plan(device)
            assert (plan.device_type, plan.dtype, plan.use_scaler) == ("cuda", dtype, scaler)
            units = amp.low_precision_units(device)
            assert units == {"fp16 tensor cores": True, "bf16 tensor cores": bf16_cores, "tf32 tensor cores": tf32}
        asked = torch.cuda.is_bf16_supported.call_args_list
        assert asked and all(c.kwargs == {"including_emulation": False} for c in asked)  # never the default
    major, minor, _ = GPUS[gpu]
    assert f"{major}.{minor}" in plan.reason and ("emulate" in plan.reason) == (dtype == torch.float16)


def test_the_dtype_of_another_gpu_is_read_from_its_capability():
    """is_bf16_supported only knows the current GPU: for cuda:1 the capability decides."""
    with fake_gpu("T4") as machine:
        assert machine.cuda == 1 and amp.pick_dtype("cuda:1") == torch.float16
        assert torch.cuda.is_bf16_supported.call_count == 0


def test_the_dtype_off_cuda():
    assert amp.pick_dtype("cpu") == torch.bfloat16 and not amp.amp_plan("cpu").use_scaler
    assert amp.pick_dtype("mps") == torch.float16
    plan = amp.amp_plan("mps")
    assert (plan.device_type, plan.dtype, plan.use_scaler) == ("mps", torch.float16, True)


T4_UNITS = {"fp16 tensor cores": True, "bf16 tensor cores": False, "tf32 tensor cores": False}
H100_UNITS = {"fp16 tensor cores": True, "bf16 tensor cores": True, "tf32 tensor cores": True}


def test_speed_verdict_on_a_t4_says_bf16_is_emulated_and_blames_no_casts():
    fp32 = step_times(1.0, "fp32", "cuda:0")
    slower = amp.speed_verdict(step_times(3.0, "bf16", "cuda:0"), fp32, torch.bfloat16, T4_UNITS)
    assert slower.startswith("bf16 takes 3.00x as long as fp32 (") and "emulated" in slower
    assert "casts" not in slower and "tensor cores save" not in slower
    faster = amp.speed_verdict(step_times(0.5, "bf16", "cuda:0"), fp32, torch.bfloat16, T4_UNITS)
    assert "emulated" in faster and "pays for the casts" not in faster
    # fp16 on the T4 has tensor cores: there the casts are a fair explanation
    fp16 = amp.speed_verdict(step_times(1.5, "fp16", "cuda:0"), fp32, torch.float16, T4_UNITS)
    assert "tensor cores save" in fp16 and "emulated" not in fp16
    # bf16 on an H100 is native
    assert "emulated" not in amp.speed_verdict(step_times(1.5, "bf16", "cuda:0"), fp32, torch.bfloat16, H100_UNITS)


def test_speed_verdict_without_fp16_tensor_cores_names_them_missing():
    units = {"fp16 tensor cores": False, "bf16 tensor cores": False, "tf32 tensor cores": False}  # a P100, 6.0
    text = amp.speed_verdict(step_times(1.5, "fp16", "cuda:0"), step_times(1.0, "fp32", "cuda:0"), torch.float16,
                             units)
    assert "no fp16 tensor cores" in text and "casts" not in text


def test_the_chapter_times_bf16_on_a_gpu_only_where_it_is_native():
    """Every cell that times bf16 on the device asks the hardware first: on a T4 it would time the emulation."""
    sources = [c.source for c in load(solution_path(CHAPTER)).cells if c.cell_type == "code"]
    timing = [s for s in sources if "amp.compare_precisions(" in s or ("time_callable(" in s and "torch.bfloat16" in s)]
    assert len(timing) >= 2
    for source in timing:
        assert 'units.get("bf16 tensor cores") is False' in source, source[:200]
    assert any("including_emulation=False" in s for s in sources)
