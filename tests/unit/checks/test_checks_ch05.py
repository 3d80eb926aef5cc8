"""helpers.checks.ch05: the spy that watches one AMP step, the task it runs on, and the verdicts of chapter 05.

The chapter's grade cells and wrong submissions are run by tests/course/test_exercises.py; these tests pin down
the machinery under them: what the spy records, that it leaves torch as it found it (GradScaler's methods,
hooks, the thread count), also when the learner's step raises, and that warnings stay off stderr.
"""

import warnings

import pytest
import torch

from helpers import amp
from helpers.checks import CheckFailed, ch05

GRADSCALER_METHODS = ("scale", "step", "update", "unscale_")


def _methods():
    return {name: vars(torch.amp.GradScaler)[name] for name in GRADSCALER_METHODS}


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    """The reference answer of exercise 1, written out (the course's own version is a tripwire in checks)."""
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


def test_spy_records_a_correct_step():
    rec = ch05.run_on_task(amp_train_step, torch.float16, init_scale=2.0**10)
    assert rec.forward == [(True, torch.float16)]
    torch.testing.assert_close(rec.backward_grads / 2.0**10, rec.reference_grads, rtol=1e-2, atol=1e-6)
    assert rec.scaler_steps == 1 and rec.scaler_updates == 1 and rec.optimizer_steps == [True] and rec.direct_steps == 0
    torch.testing.assert_close(rec.grads_at_step[0], rec.reference_grads, rtol=1e-2, atol=1e-6)
    assert rec.result == pytest.approx(rec.reference_loss, rel=1e-3)
    # the spy left no trace: its hooks record nothing more, GradScaler is torch's own again
    rec.model(rec.x).sum().backward()
    rec.optimizer.step()
    assert len(rec.forward) == 1 and len(rec.optimizer_steps) == 1 and rec.backward_count == 1
    assert "step" not in vars(rec.scaler) and "update" not in vars(rec.scaler)


def test_spy_sees_a_direct_optimizer_step_and_an_unscaled_backward():
    def wrong(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)  # no autocast
        loss.backward()  # never scaled
        optimizer.step()  # not through the scaler
        return loss.item()

    rec = ch05.run_on_task(wrong, torch.bfloat16)
    assert rec.forward == [(False, None)]
    assert rec.direct_steps == 1 and rec.scaler_steps == 0 and rec.scaler_updates == 0
    assert (rec.backward_grads.norm() / rec.reference_grads.norm()).item() == pytest.approx(1.0, rel=0.05)


def test_spy_counts_a_scaler_made_inside_the_step_and_restores_the_class():
    def own_scaler(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
        return amp_train_step(model, x, y, loss_fn, optimizer, torch.amp.GradScaler(device_type), device_type, dtype)

    before = _methods()
    rec = ch05.run_on_task(own_scaler, torch.bfloat16)
    assert rec.other_scalers == 3 and rec.scaler_steps == 0
    assert rec.direct_steps == 0  # its optimizer.step ran inside a scaler: not misnamed as a direct step
    assert _methods() == before
    with pytest.raises(CheckFailed, match="GradScaler of its own"):
        ch05.check_scaler_step(own_scaler, torch.bfloat16)
    ch05.check_given_scaler(ch05.run_on_task(amp_train_step, torch.bfloat16), "amp_train_step")  # the reference passes


@pytest.mark.parametrize("error", [ValueError("boom"), RuntimeError("boom"), KeyboardInterrupt()])
def test_gradscaler_hooks_and_threads_are_restored_when_the_step_raises(error):
    def raises(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        raise error

    before, threads = _methods(), torch.get_num_threads()
    with pytest.raises(type(error)):
        ch05.check_forward(raises, torch.float16)
    assert _methods() == before and torch.get_num_threads() == threads
    model, x, y = ch05.grading_task()
    scaler = torch.amp.GradScaler("cpu")
    with pytest.raises(type(error)):
        ch05.spy_step(raises, model, x, y, torch.nn.functional.mse_loss, torch.optim.SGD(model.parameters(), lr=0.1),
                      scaler, "cpu", torch.float16, inf_grad=True)
    assert _methods() == before and "step" not in vars(scaler)
    grads = []
    model.register_forward_pre_hook(lambda m, i: grads.append(torch.is_autocast_enabled("cpu")))
    model.zero_grad(set_to_none=True)
    model(x).sum().backward()  # the inf hook is gone: gradients are finite again
    assert torch.isfinite(next(model.parameters()).grad).all() and grads == [False]


def test_delegating_to_the_course_step_is_named_and_restores_everything():
    def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
        return amp.scaled_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype)

    before = _methods()
    with pytest.raises(CheckFailed, match="write it yourself: `helpers.amp.scaled_step`"):
        ch05.check_forward(amp_train_step, torch.bfloat16)
    assert _methods() == before
    model, x, y = ch05.grading_task()  # the course's step works again outside the check
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    assert isinstance(amp.scaled_step(model, x, y, torch.nn.functional.mse_loss, optimizer,
                                      torch.amp.GradScaler("cpu"), "cpu", torch.bfloat16), float)


def test_a_step_that_does_nothing_is_named():
    def amp_clip_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype, max_norm):
        return 0.0

    with pytest.raises(CheckFailed, match="`amp_clip_step` did nothing"):
        ch05.check_clips(amp_clip_step, torch.bfloat16)


def test_unsolved_stub_names_the_function():
    def amp_train_step(*args):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="`amp_train_step` is not written yet"):
        ch05.run_on_task(amp_train_step, torch.bfloat16)


def test_a_warning_from_the_step_does_not_reach_stderr_or_cost_points(capfd):
    """nbgrader scores 0 for a cell that writes to stderr; a warning alone never costs points."""
    def warns(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        warnings.warn("a learner's warning", UserWarning)
        return float(loss)  # recent torch warns about requires_grad here too

    with warnings.catch_warnings(record=True) as outside:
        warnings.simplefilter("always")
        ch05.check_returns(warns, torch.bfloat16)
    assert not outside and capfd.readouterr().err == ""


def test_train_on_task_reference_matches_fp32():
    start, fp32 = ch05.train_on_task(None, torch.float32, steps=30)
    _, bf16 = ch05.train_on_task(amp_train_step, torch.bfloat16, steps=30)
    assert fp32 < 0.5 * start and bf16 == pytest.approx(fp32, rel=0.2)


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
        ch05.run_on_task(converts, dtype)
    with pytest.raises(CheckFailed, match=r"model\.half\(\)"):
        ch05.train_on_task(converts, dtype, steps=2)


def test_update_before_step_is_named():
    def update_first(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.update()
        scaler.step(optimizer)
        return loss.item()

    with pytest.raises(CheckFailed, match=r"before scaler\.step\(optimizer\)"):
        ch05.run_on_task(update_first, torch.bfloat16)


@pytest.mark.parametrize("seed", [0, 5])
def test_every_verdict_passes_the_reference_for_any_case(seed):
    """The verdicts are generic: the case (dtype, scale, seed) is an argument, so hidden cases stay in the cells."""
    def amp_clip_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype, max_norm):
        optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()
        return loss.item()

    for dtype in (torch.float16, torch.bfloat16):
        ch05.check_forward(amp_train_step, dtype, seed=seed)
        ch05.check_scaled_backward(amp_train_step, dtype, scale=2.0**8, seed=seed)
        ch05.check_scaler_step(amp_train_step, dtype, seed=seed)
        ch05.check_update(amp_train_step, dtype, seed=seed)
        ch05.check_no_pile_up(amp_train_step, dtype, seed=seed)
        ch05.check_skip_inf(amp_train_step, dtype, seed=seed)
        ch05.check_returns(amp_train_step, dtype, seed=seed)
        ch05.check_clips_unscaled(amp_clip_step, dtype, scale=2.0**8, seed=seed)
        ch05.check_clips(amp_clip_step, dtype, fraction=0.5, seed=seed)
        ch05.check_clip_scaler(amp_clip_step, dtype, seed=seed)
        ch05.check_still_amp(amp_clip_step, dtype, scale=2.0**8, seed=seed)
    ch05.check_converges(amp_train_step, torch.bfloat16, steps=30, seed=seed)


def test_inject_inf_grad_is_removed_on_exit():
    model, x, y = ch05.grading_task()
    with ch05.inject_inf_grad(model):
        model(x).sum().backward()
    assert torch.isinf(next(model.parameters()).grad).all()
    model.zero_grad()
    model(x).sum().backward()
    assert torch.isfinite(next(model.parameters()).grad).all()


def test_a_check_leaves_torchs_global_state_as_it_found_it():
    """Grad mode, default dtype, threads and the random stream are the learner's, before and after a check."""
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    threads, grad, dtype = torch.get_num_threads(), torch.is_grad_enabled(), torch.get_default_dtype()
    ch05.check_skip_inf(amp_train_step, torch.float16)
    assert (torch.get_num_threads(), torch.is_grad_enabled(), torch.get_default_dtype()) == (threads, grad, dtype)
    assert torch.equal(torch.rand(3), expected)


def _step(zero_grad_between=False, backward=True, update_first=False, backward_twice=False):
    """An exercise-1 step with one switch for each mistake whose GradScaler error the checks must tell apart."""
    def step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
        if not zero_grad_between:
            optimizer.zero_grad()
        with torch.autocast(device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        if backward_twice:
            loss.backward(retain_graph=True)
        scaled = scaler.scale(loss)
        if backward:
            scaled.backward()
        if zero_grad_between:
            optimizer.zero_grad()
        if update_first:
            scaler.update()
        scaler.step(optimizer)
        if not update_first:
            scaler.update()
        return loss.item()
    return step


@pytest.mark.parametrize("switch, raised, cause", [
    ({"zero_grad_between": True}, "No inf checks were recorded for this optimizer.", "cleared between backward"),
    ({"backward": False}, "No inf checks were recorded for this optimizer.", "backward never ran"),
    ({"update_first": True}, "No inf checks were recorded prior to update.", "update() was called before"),
])
def test_each_gradscaler_assertion_gets_its_own_message_quoting_only_what_was_raised(switch, raised, cause):
    with pytest.raises(CheckFailed) as info:
        ch05.check_scaler_step(_step(**switch), torch.float16)
    message = str(info.value)
    assert raised in message and cause in message
    other = {"No inf checks were recorded for this optimizer.", "No inf checks were recorded prior to update."} - {raised}
    assert not any(text in message for text in other)


def test_backward_twice_is_caught_at_scale_one_and_by_a_two_sided_convergence_check():
    twice = _step(backward_twice=True)
    rec = ch05.run_on_task(twice, torch.bfloat16, init_scale=2.0**10)
    ratio = (rec.backward_grads.norm() / rec.reference_grads.norm()).item() / 2.0**10
    assert ratio == pytest.approx(1 + 2.0**-10, rel=1e-3)  # hidden inside any tolerance at a large scale
    with pytest.raises(CheckFailed, match="backward ran more than once \\(2 times"):
        ch05.check_scaled_backward(twice, torch.bfloat16, scale=2.0**10)
    with pytest.raises(CheckFailed, match="far below fp32's"):
        ch05.check_converges(twice, torch.bfloat16, steps=20)
    ch05.check_scaled_backward(_step(), torch.bfloat16, scale=2.0**10)
    ch05.check_converges(_step(), torch.float16, steps=20)


def test_unscaling_twice_is_named_apart_from_clipping_while_scaled():
    def clip_step(divide_again, unscale_first=True):
        def step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype, max_norm):
            optimizer.zero_grad()
            with torch.autocast(device_type, dtype=dtype):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            if unscale_first:
                scaler.unscale_(optimizer)
            if divide_again:
                for p in model.parameters():
                    p.grad /= scaler.get_scale()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
            return loss.item()
        return step

    with pytest.raises(CheckFailed, match="divided by the scale twice") as info:
        ch05.check_clips_unscaled(clip_step(divide_again=True), torch.float16, scale=2.0**12)
    assert "clipped while still scaled" not in str(info.value)
    with pytest.raises(CheckFailed, match="clipped while still scaled"):
        ch05.check_clips_unscaled(clip_step(divide_again=False, unscale_first=False), torch.float16, scale=2.0**12)
    ch05.check_clips_unscaled(clip_step(divide_again=False), torch.float16, scale=2.0**12)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_checks_loss_takes_a_low_precision_output_after_autocast_on_every_supported_torch(dtype):
    """The exercise allows the loss after the autocast block; torch 2.11's F.mse_loss cannot backpropagate
    a bf16/fp16 output against a float32 target (pytorch #94086), so the checks' loss casts first, and
    gives exactly what F.mse_loss gives inside autocast."""
    import torch.nn.functional as F

    model, x, y = ch05.grading_task(0)
    with torch.autocast("cpu", dtype=dtype):
        out = model(x)
        inside = F.mse_loss(out, y)
    assert out.dtype == dtype
    after = ch05.grading_loss(out, y)
    assert after.dtype == torch.float32 and torch.equal(after, inside)
    after.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
