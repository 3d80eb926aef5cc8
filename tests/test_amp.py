"""helpers.amp: the three training steps, the dtype plan, the autocast observations and the grading spies.

Everything runs on the CPU (CPU autocast supports fp16 and bf16; GradScaler("cpu") works); the
CUDA path has one test marked ``gpu``.
"""

import re
import warnings

import pytest
import torch
import torch.nn.functional as F

from course import ROOT, load, run_graded_cells, solution_path
from helpers import amp
from helpers.checks import CheckFailed
from helpers.models import MLP, make_regression

CHAPTER = "05_mixed_precision"


@pytest.fixture
def deprecations_are_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        warnings.simplefilter("error", FutureWarning)
        yield


def _task(lr=0.1):
    model, x, y = amp.grading_task()
    return model, x, y, torch.optim.SGD(model.parameters(), lr=lr)


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


def test_module_source_has_no_deprecated_spelling():
    source = (ROOT / "helpers" / "amp.py").read_text()
    assert not re.search(r"torch\.(cuda|cpu)\.amp\.", source)


def test_chapter_uses_deprecated_api_only_in_the_cell_that_shows_the_warning(deprecations_are_errors):
    nb = load(solution_path(CHAPTER))
    cells = [c.source for c in nb.cells if c.cell_type == "code" and re.search(r"torch\.(cuda|cpu)\.amp\.\w+\(", c.source)]
    assert len(cells) == 1 and "catch_warnings(record=True)" in cells[0]
    results = run_graded_cells(nb)  # every non-demo cell, hidden tests included, deprecations raising
    assert all(r.passed for r in results.values()), {g: r.message for g, r in results.items() if not r.passed}


def test_amp_plan_on_cpu_is_bf16_without_scaler():
    plan = amp.amp_plan("cpu")
    assert (plan.device_type, plan.dtype, plan.use_scaler) == ("cpu", torch.bfloat16, False)
    assert "CPU" in plan.reason
    units = amp.low_precision_units("cpu")
    assert units and all(v in (True, False, None) for v in units.values())


@pytest.mark.gpu
def test_amp_plan_and_scaled_step_on_cuda():
    plan = amp.amp_plan("cuda")
    assert plan.dtype in (torch.bfloat16, torch.float16) and plan.use_scaler == (plan.dtype == torch.float16)
    model, x, y = amp.grading_task()
    model, x, y = model.cuda(), x.cuda(), y.cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda", enabled=plan.use_scaler)
    losses = [amp.scaled_step(model, x, y, F.mse_loss, opt, scaler, "cuda", plan.dtype) for _ in range(20)]
    assert losses[-1] < losses[0]


def test_scaled_step_skips_inf_and_backs_off():
    model, x, y, opt = _task()
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    before = amp.flat_params(model)
    with amp.inject_inf_grad(model):
        amp.scaled_step(model, x, y, F.mse_loss, opt, scaler, "cpu", torch.float16)
    assert torch.equal(amp.flat_params(model), before)
    assert scaler.get_scale() == 512.0
    amp.scaled_step(model, x, y, F.mse_loss, opt, scaler, "cpu", torch.float16)  # the hook is gone again
    assert not torch.equal(amp.flat_params(model), before)


def test_scaled_step_clips_the_unscaled_gradients():
    model, x, y, opt = _task(lr=0.0)
    true_norm = amp.reference_grads(model, x, y, F.mse_loss, "cpu", torch.float16).norm()
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**12)
    amp.scaled_step(model, x, y, F.mse_loss, opt, scaler, "cpu", torch.float16, max_norm=float(true_norm) / 2)
    torch.testing.assert_close(amp.flat_grads(model).norm(), true_norm / 2, rtol=1e-3, atol=0)


def test_autocast_policy_sorts_ops_into_autocasts_lists():
    rows = {r["op"]: r["autocast"] for r in amp.autocast_policy("cpu", torch.bfloat16)}
    assert rows["matmul"] == rows["linear"] == "casts down to bfloat16"
    assert rows["mse_loss"] == "casts up to float32"
    assert rows["relu"] == "follows its inputs"


def test_trace_autocast_keeps_fp32_weights():
    model, x, _ = amp.grading_task()
    rows = amp.trace_autocast(model, x, "cpu", torch.bfloat16)
    first = rows[0]
    assert (first["type"], first["weights"], first["input"], first["output"]) == (
        "Linear", torch.float32, torch.float32, torch.bfloat16)
    assert next(model.parameters()).dtype == torch.float32 and model.training


def test_spy_records_a_correct_step():
    rec = amp.run_on_task(amp.scaled_step, torch.float16, init_scale=2.0**10)
    assert rec.forward == [(True, torch.float16)]
    torch.testing.assert_close(rec.backward_grads / 2.0**10, rec.reference_grads, rtol=1e-2, atol=1e-6)
    assert rec.scaler_steps == 1 and rec.scaler_updates == 1 and rec.optimizer_steps == [True] and rec.direct_steps == 0
    torch.testing.assert_close(rec.grads_at_step[0], rec.reference_grads, rtol=1e-2, atol=1e-6)
    assert rec.result == pytest.approx(rec.reference_loss, rel=1e-3)
    # the spy left no trace: methods restored, hooks removed
    assert "step" not in vars(rec.scaler) and "update" not in vars(rec.scaler)
    assert not rec.model._forward_pre_hooks and not rec.optimizer._optimizer_step_pre_hooks


def test_spy_sees_a_direct_optimizer_step_and_an_unscaled_backward():
    def wrong(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)  # no autocast
        loss.backward()  # never scaled
        optimizer.step()  # not through the scaler
        return loss.item()

    rec = amp.run_on_task(wrong, torch.bfloat16)
    assert rec.forward == [(False, None)]
    assert rec.direct_steps == 1 and rec.scaler_steps == 0 and rec.scaler_updates == 0
    assert (rec.backward_grads.norm() / rec.reference_grads.norm()).item() == pytest.approx(1.0, rel=0.05)


def test_unsolved_stub_names_the_function():
    def amp_train_step(*args):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="`amp_train_step` is not written yet"):
        amp.run_on_task(amp_train_step, torch.bfloat16)


def test_train_on_task_reference_matches_fp32():
    start, fp32 = amp.train_on_task(None, torch.float32, steps=30)
    _, bf16 = amp.train_on_task(amp.scaled_step, torch.bfloat16, steps=30)
    assert fp32 < 0.5 * start and bf16 == pytest.approx(fp32, rel=0.2)


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


def test_spy_counts_a_scaler_made_inside_the_step_and_restores_the_class():
    def own_scaler(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
        return amp.scaled_step(model, x, y, loss_fn, optimizer, torch.amp.GradScaler(device_type), device_type, dtype)

    methods = {name: vars(torch.amp.GradScaler)[name] for name in ("scale", "step", "update")}
    rec = amp.run_on_task(own_scaler, torch.bfloat16)
    assert rec.other_scalers == 3 and rec.scaler_steps == 0
    assert rec.direct_steps == 0  # its optimizer.step ran inside a scaler: not misnamed as a direct step
    with pytest.raises(CheckFailed, match="GradScaler of its own"):
        amp.check_given_scaler(rec, "amp_train_step")
    assert {name: vars(torch.amp.GradScaler)[name] for name in methods} == methods
    amp.check_given_scaler(amp.run_on_task(amp.scaled_step, torch.bfloat16), "amp_train_step")  # the reference passes


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_converting_the_model_is_named(dtype):
    def converts(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
        model.to(dtype)
        loss = loss_fn(model(x.to(dtype)), y.to(dtype))
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss.item()

    with pytest.raises(CheckFailed, match=r"model\.half\(\)"):
        amp.run_on_task(converts, dtype)
    with pytest.raises(CheckFailed, match=r"model\.half\(\)"):
        amp.train_on_task(converts, dtype, steps=2)


def test_update_before_step_is_named():
    def update_first(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.update()
        scaler.step(optimizer)
        return loss.item()

    with pytest.raises(CheckFailed, match=r"before scaler\.step\(optimizer\)"):
        amp.run_on_task(update_first, torch.bfloat16)


def test_scaled_step_works_with_a_disabled_scaler():
    # The chapter's demo passes GradScaler(enabled=False) where the plan needs no scaler (bf16).
    model, x, y, optimizer = _task()
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    before = amp.flat_params(model)
    losses = [amp.scaled_step(model, x, y, F.mse_loss, optimizer, scaler, "cpu", torch.bfloat16, max_norm=1.0)
              for _ in range(5)]
    assert not torch.equal(before, amp.flat_params(model)) and losses[-1] < losses[0]
