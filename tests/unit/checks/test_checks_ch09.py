"""helpers.checks.ch09: the verdicts of chapter 09's two exercises, on right answers written several ways and on
the typical mistakes, each of which must be named.

The cases are the notebook's grade cells' (solutions/09_fast_step/09_fast_step.ipynb), passed with the same keyword
arguments; the reference answers are the notebook's, written out here.
"""

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from helpers.checks import CheckFailed, ch09

UTILISATION_CASES = [dict(batch=5, width=32, seconds=0.002, peak=1e10, seed=0),
                     dict(batch=7, width=48, seconds=0.01, peak=5e9, seed=1)]
FAST_CASES = [dict(steps=4, batch=6, seed=0), dict(steps=3, batch=5, seed=3, lr=3e-2)]


# --------------------------------------------------------------------------- exercise 1: step_flops_utilisation


def step_flops_utilisation(model, batch, seconds, peak):
    """The notebook's reference answer."""
    x, y = batch
    with FlopCounterMode(display=False) as counter:
        F.cross_entropy(model(x), y).backward()
    return counter.get_total_flops() / seconds / peak


def by_module(model, batch, seconds, peak):
    """Right, written differently: forward and backward counted in two blocks, the totals read per module."""
    x, y = batch
    total = 0
    with FlopCounterMode(display=False) as counter:
        loss = F.cross_entropy(model(x), y)
    total += counter.get_flop_counts()["Global"].get(torch.ops.aten.addmm, 0) + sum(
        v for k, v in counter.get_flop_counts()["Global"].items() if k is not torch.ops.aten.addmm)
    with FlopCounterMode(display=False) as counter:
        loss.backward()
    total += sum(counter.get_flop_counts()["Global"].values())
    return torch.tensor(total / (seconds * peak))


def forward_only(model, batch, seconds, peak):
    x, _y = batch
    with FlopCounterMode(display=False) as counter:
        model(x)
    return counter.get_total_flops() / seconds / peak


def halved(model, batch, seconds, peak):
    return step_flops_utilisation(model, batch, seconds, peak) / 2


def per_sample(model, batch, seconds, peak):
    return step_flops_utilisation(model, batch, seconds / len(batch[0]), peak)


def percent(model, batch, seconds, peak):
    return 100 * step_flops_utilisation(model, batch, seconds, peak)


@pytest.mark.parametrize("answer", [step_flops_utilisation, by_module])
@pytest.mark.parametrize("case", UTILISATION_CASES)
def test_right_utilisations_pass(answer, case):
    ch09.check_utilisation(answer, **case)


@pytest.mark.parametrize(("answer", "says"), [(forward_only, "only the forward"), (halved, "multiply-add"),
                                              (per_sample, "per sample"), (percent, "percentage")])
@pytest.mark.parametrize("case", UTILISATION_CASES)
def test_each_utilisation_mistake_is_named(answer, says, case):
    with pytest.raises(CheckFailed, match=says):
        ch09.check_utilisation(answer, **case)


def test_two_mistakes_at_once_are_both_named():
    def both(model, batch, seconds, peak):
        return forward_only(model, batch, seconds, peak) / 2

    with pytest.raises(CheckFailed, match="only the forward.*And: a multiply-add"):
        ch09.check_utilisation(both, **UTILISATION_CASES[0])


def test_an_unnamed_wrong_utilisation_still_fails():
    with pytest.raises(CheckFailed, match="expected") as err:
        ch09.check_utilisation(lambda m, b, s, p: 0.123, **UTILISATION_CASES[0])
    assert "Likely" not in str(err.value)


def test_the_mistakes_of_the_cases_are_told_apart():
    """Each mistake gives a different number on the grade cells' cases, so a message never names the wrong one."""
    for case in UTILISATION_CASES:
        model, data = ch09._case(case["batch"], case["width"], case["seed"])
        forward, total = ch09.reference_flops(model, *data)
        values = [v for v, _ in ch09._utilisation_mistakes(forward, total, case["seconds"], case["peak"], case["batch"])]
        values.append(total / case["seconds"] / case["peak"])
        assert len({round(v, 9) for v in values}) == len(values)


def test_the_reference_count_is_forward_and_backward_with_two_flops_a_multiply_add():
    model, (x, y) = ch09._case(5, 32, 0)
    forward, total = ch09.reference_flops(model, x, y)
    assert forward == 2 * 5 * (12 * 32 + 32 * 32 + 32 * 5)
    assert 2 * forward < total < 3 * forward  # the first layer's input needs no gradient
    assert all(p.grad is None for p in model.parameters())


# --------------------------------------------------------------------------- exercise 2: fast_step


def fast_step(model, batches, lr):
    """The notebook's reference answer."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    device = next(model.parameters()).device
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses).tolist()


def float32_buffer(model, batches, lr):
    """Right, written differently: float32, a preallocated loss buffer, the optimizer's zero_grad after the step."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    losses = torch.zeros(len(batches), device=batches[0][0].device)  # on the device: no copy to the host
    for i, (x, y) in enumerate(batches):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses[i] = loss.detach()
    return [float(v) for v in losses.tolist()]


def item_per_step(model, batches, lr):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def loop_over_batch(model, batches, lr):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        total = 0
        for i in range(len(x)):
            loss = F.cross_entropy(model(x[i:i + 1]), y[i:i + 1]) / len(x)
            loss.backward()
            total = total + loss.detach()
        optimizer.step()
        losses.append(total)
    return torch.stack(losses).tolist()


def unfused(model, batches, lr, **options):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, **options)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses).tolist()


def no_zero_grad(model, batches, lr):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    losses = []
    for x, y in batches:
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses).tolist()



def variant(dtype=None, scaler=False, clip=False, optimizer=torch.optim.AdamW, lr_written=None, set_to_none=True,
            read=lambda step, loss, steps: None):
    """A fast_step written one way or another: autocast's dtype (None: float32), a GradScaler, a clip_grad_norm_ to
    1.0, the optimizer's class, a learning rate written in, zero_grad's set_to_none, a read made in some steps."""
    def fast_step(model, batches, lr):
        opt = optimizer(model.parameters(), lr=lr_written or lr, fused=True)
        grad_scaler = torch.amp.GradScaler("cpu") if scaler else None
        losses = []
        for step, (x, y) in enumerate(batches):
            opt.zero_grad(set_to_none=set_to_none)
            with torch.autocast(x.device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
                loss = F.cross_entropy(model(x), y)
            if grad_scaler is not None:
                grad_scaler.scale(loss).backward()
                if clip:
                    grad_scaler.unscale_(opt)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                grad_scaler.step(opt)
                grad_scaler.update()
            else:
                loss.backward()
                if clip:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
            read(step, loss, len(batches))
            losses.append(loss.detach())
        return torch.stack(losses).tolist()

    return fast_step


float16_grad_scaler = variant(dtype=torch.float16, scaler=True)
float32_keep_grads = variant(set_to_none=False)
adam = variant(optimizer=torch.optim.Adam)
lr_written_in = variant(dtype=torch.bfloat16, lr_written=1e-2)

CHECKS = {"results": lambda f, c: ch09.check_fast_results(f, **c),
          "no_syncs": lambda f, c: ch09.check_fast_no_syncs(f, few=c["steps"], many=2 * c["steps"], batch=c["batch"],
                                                            seed=c["seed"]),
          "batched": lambda f, c: ch09.check_fast_batched(f, c["steps"], c["batch"], c["seed"]),
          "fused": lambda f, c: ch09.check_fast_fused(f, c["steps"], c["batch"], c["seed"])}


@pytest.mark.parametrize("answer", [fast_step, float32_buffer, float16_grad_scaler, float32_keep_grads])
@pytest.mark.parametrize("check", sorted(CHECKS))
@pytest.mark.parametrize("case", FAST_CASES)
def test_right_fast_steps_pass(answer, check, case):
    CHECKS[check](answer, case)


@pytest.mark.parametrize(("answer", "check", "says"), [
    (item_per_step, "no_syncs", "in every step"),
    (loop_over_batch, "batched", "a Python loop over the batch"),
    (lambda m, b, lr: unfused(m, b, lr, foreach=False), "fused", "not fused"),
    (lambda m, b, lr: unfused(m, b, lr, foreach=True), "fused", "foreach=True is the multi-tensor loop"),
    (lambda m, b, lr: unfused(m, b, lr), "fused", "not fused"),
    (no_zero_grad, "results", "zero_grad"),
    (adam, "results", "steps a torch.optim.Adam, not an AdamW"),
    (variant(dtype=torch.bfloat16, optimizer=torch.optim.Adam), "results", "steps a torch.optim.Adam, not an AdamW"),
    (variant(clip=True), "results", "0.2[0-9]x as long .* clip_grad_norm_"),
    (variant(dtype=torch.bfloat16, clip=True), "results", "clip_grad_norm_"),
    (variant(dtype=torch.float16, scaler=True, clip=True), "results", "clip_grad_norm_"),
    (variant(dtype=torch.float16), "results", "float16 autocast without a GradScaler"),
    (variant(optimizer=lambda params, **options: torch.optim.AdamW(params, weight_decay=0.0, **options)), "results",
     "weight_decay is 0.0, slow_step's AdamW uses 0.01"),
    (variant(read=lambda step, loss, steps: loss.item() if step == 0 else None), "no_syncs",
     "inside the loop, in some steps only: .*1x in 8 steps"),
    (variant(read=lambda step, loss, steps: loss.item() if step < 2 else None), "no_syncs",
     "inside the loop, in some steps only: .*2x in 8 steps"),
])
def test_each_fast_step_mistake_is_named(answer, check, says):
    with pytest.raises(CheckFailed, match=says):
        CHECKS[check](answer, FAST_CASES[0])


@pytest.mark.parametrize("answer", [item_per_step, loop_over_batch])
def test_the_mistakes_that_train_right_pass_the_results_check(answer):
    """Only the check that names a mistake fails on it: weights are not where a sync or a loop shows."""
    CHECKS["results"](answer, FAST_CASES[0])


def test_the_weight_tolerance_covers_autocast_on_every_case_and_not_a_forgotten_zero_grad():
    """The measurement behind WEIGHT_TOLERANCE, repeated: bfloat16 autocast inside it, no zero_grad outside."""
    for seed in range(6):
        model, batches = ch09.make_train_case(4, 6, seed)
        start = ch09._flat(model)
        slow, _ = ch09.make_train_case(4, 6, seed)
        ch09.slow_reference(slow, batches)
        moved = (ch09._flat(slow) - start).norm()
        for answer, inside in ((fast_step, True), (no_zero_grad, False)):
            model, _ = ch09.make_train_case(4, 6, seed)
            answer(model, batches, 1e-2)
            off = float((ch09._flat(model) - ch09._flat(slow)).norm() / moved)
            assert (off <= ch09.WEIGHT_TOLERANCE) is inside, (seed, answer.__name__, off)


# --------------------------------------------------------------------------- the course's own versions


def test_the_course_versions_earn_nothing():
    """ladder.step_flops (section 1) and ladder.train_steps (section 2) are the course's own answers."""
    from helpers import ladder
    from helpers.checks.delegation import CourseVersionCalled

    def step_flops_utilisation(model, batch, seconds, peak):  # the tripwires are the exercise's, found by its name
        return ladder.step_flops(model, *batch).total / seconds / peak

    def fast_step(model, batches, lr):
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
        return ladder.train_steps(model, optimizer, batches, torch.device("cpu"), ladder.Rung("x", sync_free=True))

    with pytest.raises(CourseVersionCalled, match="ladder.step_flops"):
        ch09.check_utilisation(step_flops_utilisation, **UTILISATION_CASES[0])
    with pytest.raises(CourseVersionCalled, match="ladder.train_steps"):
        ch09.check_fast_results(fast_step, **FAST_CASES[0])


# --------------------------------------------------------------------------- fast_step: what the task names, varied


def test_a_learning_rate_written_in_fails_where_the_check_passes_another():
    CHECKS["results"](lr_written_in, FAST_CASES[0])  # lr 1e-2: the number written in happens to be right
    with pytest.raises(CheckFailed, match=r"learning rate is 0.01, but the check called fast_step with lr=0.03"):
        CHECKS["results"](lr_written_in, FAST_CASES[1])


def test_a_grad_scalers_skipped_steps_are_skipped_by_the_reference():
    """float16 with torch.amp.GradScaler("cpu") at its default scale skips its first steps on these cases (an inf
    in the scaled gradients); the reference skips the same batches, so chapter 05's recipe passes."""
    model, batches = ch09.make_train_case(**{k: v for k, v in FAST_CASES[0].items() if k != "lr"})
    _losses, seen = ch09._watch_training(float16_grad_scaler, model, batches, 1e-2)
    assert seen.skipped and seen.scaler_steps == len(batches)
    for case in FAST_CASES:
        CHECKS["results"](float16_grad_scaler, case)


def test_a_step_the_optimizer_never_takes_fails_without_a_grad_scaler():
    def every_other(model, batches, lr):
        opt = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
        losses = []
        for step, (x, y) in enumerate(batches):
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            if step % 2:
                opt.step()
                opt.zero_grad()
            losses.append(loss.detach())
        return torch.stack(losses).tolist()

    with pytest.raises(CheckFailed, match="stepped 2 times for 4 batches"):
        CHECKS["results"](every_other, FAST_CASES[0])


GRADE_CASES = [(4, 6, 0), (3, 5, 3), (5, 8, 4), (1, 3, 5), (6, 6, 7), (4, 6, 1), (4, 6, 2)]
LEARNING_RATES = [1e-2, 3e-2, 2e-2, 5e-3]


def test_the_gradient_tolerances_cover_autocast_and_not_clipping():
    """The measurement behind GRADIENT_TOLERANCE and GRADIENT_LENGTH_TOLERANCE, repeated on the grade cells' cases
    and learning rates: bfloat16 autocast well inside both, clip_grad_norm_(1.0) shortens every step's gradients
    past the length tolerance by a wide margin."""
    for steps, batch, seed in GRADE_CASES:
        for lr in LEARNING_RATES[:2]:
            for answer, inside in ((fast_step, True), (float16_grad_scaler, True), (variant(clip=True), False),
                                   (variant(dtype=torch.bfloat16, clip=True), False)):
                model, batches = ch09.make_train_case(steps, batch, seed)
                _losses, seen = ch09._watch_training(answer, model, batches, lr)
                worst = max(abs(ratio - 1) for _b, _off, ratio, _cos in seen.gradients)
                if inside:
                    assert worst < ch09.GRADIENT_LENGTH_TOLERANCE / 5, (steps, seed, lr, worst)
                    assert max(off for _b, off, *_rest in seen.gradients) < ch09.GRADIENT_TOLERANCE / 2
                else:
                    assert min(abs(ratio - 1) for _b, _off, ratio, _cos in seen.gradients) > \
                        4 * ch09.GRADIENT_LENGTH_TOLERANCE, (steps, seed, lr)


def test_float32_answers_are_held_to_float32s_rounding_which_sees_weight_decay_and_clipping():
    """Without autocast the weights must agree within FLOAT32_WEIGHT_TOLERANCE: a right float32 answer is 100x inside
    it, Adam for AdamW (no decoupled weight decay) and clipping are outside it on every case, even before the
    optimizer and gradient checks name them."""
    for steps, batch, seed in GRADE_CASES:
        for lr in LEARNING_RATES:
            slow, batches = ch09.make_train_case(steps, batch, seed)
            start = ch09._flat(slow)
            ch09.slow_reference(slow, batches, lr)
            moved = (ch09._flat(slow) - start).norm()
            for answer, inside in ((float32_keep_grads, True), (adam, False), (variant(clip=True), False)):
                model, _ = ch09.make_train_case(steps, batch, seed)
                answer(model, batches, lr)
                off = float((ch09._flat(model) - ch09._flat(slow)).norm() / moved)
                if inside:
                    assert off < ch09.FLOAT32_WEIGHT_TOLERANCE / 100, (steps, seed, lr, off)
                else:
                    assert off > 2 * ch09.FLOAT32_WEIGHT_TOLERANCE, (answer, steps, seed, lr, off)


def test_a_read_before_the_loop_or_after_the_last_forward_is_not_inside_it():
    """The loop is from the first step's forward to the last step's: a read after the last forward (the last loss,
    once) waits for no more than the read after the loop."""
    CHECKS["no_syncs"](variant(read=lambda step, loss, steps: loss.item() if step == steps - 1 else None),
                       FAST_CASES[0])
