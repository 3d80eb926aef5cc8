"""helpers.checks.ch03: each verdict passes a correct answer and names each typical mistake.

The notebook's own submissions (tests/submissions/03_memory) run these through the grade cells; here each
verdict is called directly, so a broken verdict shows up with its own name.
"""

import gc
import warnings

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from helpers import memory as mem
from helpers.checks import CheckFailed, ch03
from helpers.models import flat_grads

# ----------------------------------------------------------------------------- answers the verdicts judge


def training_memory(model, dtype):
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad) * dtype.itemsize
    return {"parameters": sum(p.numel() for p in model.parameters()) * dtype.itemsize,
            "gradients": trainable, "adam_state": 2 * trainable}


def counts_state_dict(model, dtype):
    answer = training_memory(model, dtype)
    answer["parameters"] = sum(t.numel() for t in model.state_dict().values()) * dtype.itemsize
    return answer


def max_batch_size(step, budget, start=1, limit=65536):
    def fits(n):
        out_of_memory = False
        try:
            with budget:
                step(n)
        except torch.OutOfMemoryError:
            out_of_memory = True
        if out_of_memory:
            mem.free_memory(budget.device)
        return not out_of_memory

    if not fits(start):
        return 0
    good, bad = start, None
    while bad is None:
        if good >= limit:
            return limit
        n = min(2 * good, limit)
        good, bad = (n, None) if fits(n) else (good, n)
    while bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if fits(mid) else (good, mid)
    return good


def doubling_only(step, budget, start=1, limit=65536):
    n = start
    while 2 * n <= limit and max_batch_size(step, budget, 2 * n, 2 * n) == 2 * n:
        n *= 2
    return n


def catches_everything(step, budget, start=1, limit=65536):
    def safe(n):
        try:
            step(n)
        except Exception:  # noqa: BLE001 - the mistake under test
            raise torch.OutOfMemoryError("pretend") from None
    return max_batch_size(safe, budget, start, limit)


def accumulate_gradients(model, optimizer, loss_fn, x, y, k):
    optimizer.zero_grad(set_to_none=True)
    for xb, yb in zip(x.chunk(k), y.chunk(k)):
        (loss_fn(model(xb), yb) / k).backward()
    optimizer.step()


def no_divide(model, optimizer, loss_fn, x, y, k):
    optimizer.zero_grad()
    for xb, yb in zip(x.chunk(k), y.chunk(k)):
        loss_fn(model(xb), yb).backward()
    optimizer.step()


def step_every_micro_batch(model, optimizer, loss_fn, x, y, k):
    optimizer.zero_grad()
    for xb, yb in zip(x.chunk(k), y.chunk(k)):
        (loss_fn(model(xb), yb) / k).backward()
        optimizer.step()


def never_zeroes(model, optimizer, loss_fn, x, y, k):
    for xb, yb in zip(x.chunk(k), y.chunk(k)):
        (loss_fn(model(xb), yb) / k).backward()
    optimizer.step()


def sums_then_backward(model, optimizer, loss_fn, x, y, k):
    optimizer.zero_grad()
    (sum(loss_fn(model(xb), yb) for xb, yb in zip(x.chunk(k), y.chunk(k))) / k).backward()
    optimizer.step()


def mlp():
    return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Linear(16, 4))


# ----------------------------------------------------------------------------- estimate-memory


@pytest.mark.parametrize("part", ["parameters", "gradients", "adam_state"])
def test_a_correct_estimate_passes_every_part(part):
    frozen = mlp()
    frozen[0].requires_grad_(False)
    ch03.check_training_memory(training_memory, frozen, part, "a frozen model", dtype=torch.bfloat16)
    ch03.check_follows_dtype(training_memory, frozen, torch.float16, "a frozen model")


def test_counting_the_state_dict_is_named():
    with pytest.raises(CheckFailed, match="state_dict"):
        ch03.check_training_memory(counts_state_dict, mlp(), "parameters", "a model with BatchNorm")


def test_a_fixed_element_size_fails_the_dtype_check():
    def four_bytes(model, dtype):
        return training_memory(model, torch.float32)

    with pytest.raises(CheckFailed, match="dtype argument"):
        ch03.check_follows_dtype(four_bytes, mlp(), torch.bfloat16, "a float32 model")


def test_the_wrong_shape_of_answer_is_named_and_a_bad_part_is_a_usage_error():
    with pytest.raises(CheckFailed, match="Return a dict"):
        ch03.check_training_memory(lambda model, dtype: 1132, mlp(), "parameters", "a model")
    with pytest.raises(CheckFailed, match="without the key 'adam_state'"):
        ch03.check_training_memory(lambda model, dtype: {"parameters": 0}, mlp(), "adam_state", "a model")
    with pytest.raises(ValueError, match="part must be one of"):
        ch03.check_training_memory(training_memory, mlp(), "weights", "a model")


def test_bits_hint_names_only_the_factor_of_eight():
    assert "bits" in ch03.bits_hint(8 * 1132, 1132)
    assert ch03.bits_hint(1132, 1132) == "" and ch03.bits_hint(2 * 1132, 1132) == "" and ch03.bits_hint(None, 0) == ""


# ----------------------------------------------------------------------------- max-batch-size


def test_a_correct_search_passes_every_verdict():
    ch03.check_search_fits(max_batch_size, 1024, 16, 700)
    ch03.check_search_fits(max_batch_size, 1024, 0, 0)
    ch03.check_largest(max_batch_size, 512, 0, 1000, start=3, limit=640)
    ch03.check_recovers_outside_except(max_batch_size, 1024, 8192, 300)
    ch03.check_releases_everything(max_batch_size, 1024, 8192, 300)
    ch03.check_lets_other_errors_through(max_batch_size, lambda n: [][n] if n >= 16 else None, IndexError)


def test_doubling_alone_is_told_to_bisect():
    with pytest.raises(CheckFailed, match="bisect"):
        ch03.check_largest(doubling_only, 1024, 16, 700)


def test_returning_the_first_failure_exceeds_the_budget():
    def first_failure(step, budget, start=1, limit=65536):
        return max_batch_size(step, budget, start, limit) + 1

    with pytest.raises(CheckFailed, match="exceeds the budget"):
        ch03.check_search_fits(first_failure, 1024, 16, 700)


def test_an_escaping_out_of_memory_error_is_told_to_recover():
    def never_catches(step, budget, start=1, limit=65536):
        with budget:
            step(limit)

    with pytest.raises(CheckFailed, match="Recover"):
        ch03.check_search_fits(never_catches, 1024, 16, 700)


def test_catching_every_error_is_named_and_so_is_never_trying():
    with pytest.raises(CheckFailed, match="Catch only torch.OutOfMemoryError") as info:
        ch03.check_lets_other_errors_through(catches_everything, lambda n: [][n] if n >= 16 else None, IndexError)
    assert "step(16) raised IndexError" in str(info.value)
    with pytest.raises(CheckFailed, match="without ever reaching a size at which step raises IndexError"):
        ch03.check_lets_other_errors_through(lambda step, budget: 700, lambda n: [][n], IndexError)


def test_retrying_inside_except_is_seen_holding_memory():
    def retries_inside(step, budget, start=1, limit=65536):
        def attempt(n):
            try:
                with budget:
                    step(n)
                return n
            except torch.OutOfMemoryError:
                return attempt(n // 2)
        return attempt(limit)

    with pytest.raises(CheckFailed, match="still held under the budget"):
        ch03.check_recovers_outside_except(retries_inside, 1024, 8192, 300)


def test_keeping_the_last_error_is_seen_after_the_search():
    kept = []

    def keeps_error(step, budget, start=1, limit=65536):
        try:
            with budget:
                step(limit)
        except torch.OutOfMemoryError as err:
            kept.append(err)
        return max_batch_size(step, budget, start, limit)

    with pytest.raises(CheckFailed, match="still held under the budget after max_batch_size returned"):
        ch03.check_releases_everything(keeps_error, 1024, 8192, 300)
    kept.clear()
    gc.collect()


# ----------------------------------------------------------------------------- grad-accumulation


def test_a_correct_accumulation_passes_every_verdict():
    ch03.check_every_micro_batch_counts(accumulate_gradients, k=4)
    ch03.check_gradient_scale(accumulate_gradients, k=3)
    ch03.check_one_step(accumulate_gradients, k=4, lr=0.1)
    ch03.check_zeroes_first(accumulate_gradients, k=4, seed=3)
    ch03.check_one_micro_batch_alive(accumulate_gradients, k=8)


@pytest.mark.parametrize("wrong, verdict, words", [
    (no_divide, ch03.check_gradient_scale, "Divide each micro-batch's loss by k"),
    (step_every_micro_batch, ch03.check_one_step, "Step once"),
    (never_zeroes, ch03.check_zeroes_first, "zero the gradients once"),
    (sums_then_backward, ch03.check_one_micro_batch_alive, "one backward per micro-batch"),
])
def test_each_accumulation_mistake_is_named(wrong, verdict, words):
    with pytest.raises(CheckFailed, match=words):
        verdict(wrong, k=8 if verdict is ch03.check_one_micro_batch_alive else 4)


def test_zeroing_every_micro_batch_is_seen_in_the_gradients_direction():
    def zero_every(model, optimizer, loss_fn, x, y, k):
        for xb, yb in zip(x.chunk(k), y.chunk(k)):
            optimizer.zero_grad()
            (loss_fn(model(xb), yb) / k).backward()
        optimizer.step()

    with pytest.raises(CheckFailed, match="zeroed in every micro-batch"):
        ch03.check_every_micro_batch_counts(zero_every, k=4)


def test_a_correct_answer_that_warns_passes_without_printing_the_warning():
    """nbgrader scores 0 for a cell that writes to stderr: the verdict records the learner's warnings."""
    def warns(*args):
        warnings.warn("a deprecated call, harmless here", FutureWarning)
        accumulate_gradients(*args)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning that escaped the verdict would raise here
        ch03.check_every_micro_batch_counts(warns, k=2)


def test_accumulation_case_last_only_has_zero_gradient_before_the_last_micro_batch():
    model, x, y = ch03.accumulation_case("last-only", k=4)
    assert ch03.big_batch_gradient(model, F.mse_loss, x[:8], y[:8]).abs().sum() == 0
    assert ch03.big_batch_gradient(model, F.mse_loss, x, y).abs().sum() > 0
    assert flat_grads(model, trainable_only=True).abs().sum() == 0  # .grad untouched


def test_accumulation_case_is_reproducible_and_leaves_the_global_generator_alone():
    state = torch.get_rng_state()
    (m1, x1, _), (m2, x2, _) = ch03.accumulation_case("mlp", 4, seed=5), ch03.accumulation_case("mlp", 4, seed=5)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(x1, x2) and all(torch.equal(a, b) for a, b in zip(m1.parameters(), m2.parameters()))
    with pytest.raises(ValueError, match="kind must be"):
        ch03.accumulation_case("cnn")


def test_one_micro_batch_peak_is_far_below_all_micro_batches_alive_together():
    k = 8
    model, x, y = ch03.accumulation_case("wide", k=k)
    one = ch03.micro_batch_peak(model, F.mse_loss, x, y, k)
    assert all(p.grad is None for p in model.parameters())  # measured on a copy
    with mem.track_memory("cpu", method="tensors") as stepwise:
        for xb, yb in zip(x.chunk(k), y.chunk(k)):
            (F.mse_loss(model(xb), yb) / k).backward()
    model.zero_grad(set_to_none=True)
    with mem.track_memory("cpu", method="tensors") as summed:
        (sum(F.mse_loss(model(xb), yb) for xb, yb in zip(x.chunk(k), y.chunk(k))) / k).backward()
    assert stepwise.peak_bytes < 1.5 * one < 2 * one < summed.peak_bytes / 1.5
