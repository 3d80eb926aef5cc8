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
FAST_CASES = [dict(steps=4, batch=6, seed=0), dict(steps=3, batch=5, seed=3)]


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


CHECKS = {"results": lambda f, c: ch09.check_fast_results(f, **c),
          "no_syncs": lambda f, c: ch09.check_fast_no_syncs(f, few=c["steps"], many=2 * c["steps"], batch=c["batch"],
                                                            seed=c["seed"]),
          "batched": lambda f, c: ch09.check_fast_batched(f, **c),
          "fused": lambda f, c: ch09.check_fast_fused(f, **c)}


@pytest.mark.parametrize("answer", [fast_step, float32_buffer])
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
