"""helpers.checks.ch08: the verdicts of chapter 08's two exercises, on right answers written several ways and on
the typical mistakes, each of which must be named.

The cases are the notebook's grade cells' (solutions/08_speed/08_speed.ipynb, c009-c011 and c028-c030), passed
with the same keyword arguments; the reference answers are the notebook's (c008, c027), written out here.
"""

import inspect
import math
import re
import statistics

import pytest
import torch
import torch.nn.functional as F

from helpers import benchmark as bench
from helpers.checks import CheckFailed, ch08

# --------------------------------------------------------------------------- exercise 1: train_quietly

#: check_results's cases in the grade cell (visible, then hidden): batches, batch size, the last batch's size, seed
RESULT_CASES = [dict(batches=4, batch=8, last=8, seed=0), dict(batches=5, batch=8, last=3, seed=1),
                dict(batches=1, batch=8, last=5, seed=2), dict(batches=7, batch=16, last=1, seed=3)]
SYNC_CASES = [dict(few=3, many=6, batch=8, seed=0), dict(few=2, many=9, batch=4, seed=5)]
NAN_CASES = [dict(batches=4, nan_at=2, seed=0), dict(batches=3, nan_at=0, seed=1), dict(batches=5, nan_at=4, seed=2)]


def train_quietly(model, optimizer, batches):
    """The notebook's reference answer (c008)."""
    losses, correct, seen = [], None, 0
    for x, y in batches:
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())  # stays on the device: no sync
        hits = (logits.argmax(dim=1) == y).sum()
        correct = hits if correct is None else correct + hits
        seen += len(y)
    losses = torch.stack(losses)
    if torch.isnan(losses).any():  # one sync, after the loop
        raise FloatingPointError(f"a loss is NaN (first at step {int(torch.isnan(losses).nonzero()[0])})")
    return losses.tolist(), correct.item() / seen  # two more


def preallocated(model, optimizer, batches):
    """Right, written differently: a loss tensor on the batches' device filled by index, a running long count there,
    torch.isfinite(...).all()."""
    losses = torch.empty(len(batches), device=batches[0][0].device)
    correct = torch.zeros((), dtype=torch.long, device=batches[0][0].device)
    seen = 0
    for i, (x, y) in enumerate(batches):
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        losses[i] = loss.detach()
        correct += (logits.argmax(1) == y).sum()
        seen += y.shape[0]
    if not torch.isfinite(losses).all():
        raise FloatingPointError("a loss is not finite")
    return losses.tolist(), float(correct) / seen


def running_sums(model, optimizer, batches):
    """Right, written differently: float running sums in tensors, the losses as a concatenation, seen as a tensor
    (on the host: a host scalar added to a device value is not a copy, and reading it waits for nothing)."""
    losses = torch.zeros(0, device=batches[0][0].device)
    correct, seen = torch.zeros(()), torch.zeros((), dtype=torch.long)
    for x, y in batches:
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        losses = torch.cat([losses, loss.detach().reshape(1)])
        correct = correct + logits.argmax(1).eq(y).float().sum()
        seen = seen + y.numel()
    if torch.isnan(losses).any().item():
        raise FloatingPointError("NaN loss")
    values = losses.tolist()
    return values, correct.item() / seen.item()


def _step(model, optimizer, x, y):
    optimizer.zero_grad()
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    optimizer.step()
    return logits, loss


def _quiet_loop(model, optimizer, batches):
    """The loop most answers below share (losses kept as tensors, a tensor count): they differ after it."""
    losses, correct, seen = [], 0, 0
    for x, y in batches:
        logits, loss = _step(model, optimizer, x, y)
        losses.append(loss.detach())
        correct += (logits.argmax(1) == y).sum()
        seen += len(y)
    return losses, correct, seen


def item_each_step(model, optimizer, batches):
    losses, correct, seen = [], 0, 0
    for x, y in batches:
        logits, loss = _step(model, optimizer, x, y)
        losses.append(loss.item())
        correct += (logits.argmax(1) == y).sum()
        seen += len(y)
    if any(math.isnan(v) for v in losses):
        raise FloatingPointError("NaN loss")
    return losses, correct.item() / seen


def isnan_each_step(model, optimizer, batches):
    losses, correct, seen = [], 0, 0
    for x, y in batches:
        logits, loss = _step(model, optimizer, x, y)
        if torch.isnan(loss):
            raise FloatingPointError("NaN loss")
        losses.append(loss.detach())
        correct += (logits.argmax(1) == y).sum()
        seen += len(y)
    return torch.stack(losses).tolist(), correct.item() / seen


def _keeping_each_step(model, optimizer, batches, keep):
    """The quiet loop, except that each step keeps ``keep(loss, x)``: a wrong answer differs in that one line."""
    losses, correct, seen = [], 0, 0
    for x, y in batches:
        logits, loss = _step(model, optimizer, x, y)
        losses.append(keep(loss, x))
        correct += (logits.argmax(1) == y).sum()
        seen += len(y)
    losses = torch.stack(losses)
    if torch.isnan(losses).any():
        raise FloatingPointError("NaN loss")
    return losses.tolist(), correct.item() / seen


def cpu_each_step(model, optimizer, batches):
    losses, correct, seen = [], 0, 0
    for x, y in batches:
        logits, loss = _step(model, optimizer, x, y)
        losses.append(loss.detach().cpu())
        correct += (logits.argmax(1) == y).sum()
        seen += len(y)
    losses = torch.stack(losses)
    if torch.isnan(losses).any():
        raise FloatingPointError("NaN loss")
    return losses.tolist(), correct.item() / seen


def to_cpu_each_step(model, optimizer, batches):
    return _keeping_each_step(model, optimizer, batches, lambda loss, x: loss.detach().to("cpu"))


def tensor_on_device_each_step(model, optimizer, batches):
    return _keeping_each_step(model, optimizer, batches,
                              lambda loss, x: loss.detach() * torch.tensor(1.0, device=x.device))


def _wait_for(where):
    from helpers import device as dev

    dev.synchronize(where)  # the course's own synchronize, one call away from the loop: counted where it runs


def _waiting(loss, x):
    _wait_for(x.device)
    return loss.detach()


def course_synchronize_each_step(model, optimizer, batches):
    return _keeping_each_step(model, optimizer, batches, _waiting)


def host_buffer_each_step(model, optimizer, batches):
    losses, correct, seen = torch.empty(len(batches)), 0, 0  # on the host: no device named
    for i, (x, y) in enumerate(batches):
        logits, loss = _step(model, optimizer, x, y)
        losses[i] = loss.detach()
        correct += (logits.argmax(1) == y).sum()
        seen += len(y)
    if torch.isnan(losses).any():
        raise FloatingPointError("NaN loss")
    return losses.tolist(), correct.item() / seen


def guarded_synchronize_each_step(model, optimizer, batches):
    losses, correct, seen = [], 0, 0
    for x, y in batches:
        logits, loss = _step(model, optimizer, x, y)
        if torch.cuda.is_available():  # never true on the grader: only the code can tell
            torch.cuda.synchronize()
        losses.append(loss.detach())
        correct += (logits.argmax(1) == y).sum()
        seen += len(y)
    losses = torch.stack(losses)
    if torch.isnan(losses).any():
        raise FloatingPointError("NaN loss")
    return losses.tolist(), correct.item() / seen


def one_by_one_after(model, optimizer, batches):
    losses, correct, seen = _quiet_loop(model, optimizer, batches)
    values = [float(l) for l in losses]
    if any(math.isnan(v) for v in values):
        raise FloatingPointError("NaN loss")
    return values, correct.item() / seen


def too_many_reads_after(model, optimizer, batches):
    losses, correct, seen = _quiet_loop(model, optimizer, batches)
    losses = torch.stack(losses)
    if torch.isnan(losses).any():
        raise FloatingPointError("NaN loss")
    print(f"mean loss {losses.mean().item():.3f}, last {losses[-1].item():.3f}")  # two reads more, once each
    return losses.tolist(), correct.item() / seen


def averaged_per_batch(model, optimizer, batches):
    losses, accuracies = [], []
    for x, y in batches:
        logits, loss = _step(model, optimizer, x, y)
        losses.append(loss.detach())
        accuracies.append((logits.argmax(1) == y).double().mean())
    losses = torch.stack(losses)
    if torch.isnan(losses).any():
        raise FloatingPointError("NaN loss")
    return losses.tolist(), torch.stack(accuracies).mean().item()


def returns_tensors(model, optimizer, batches):
    losses, correct, seen = _quiet_loop(model, optimizer, batches)
    losses = torch.stack(losses)
    if torch.isnan(losses).any():
        raise FloatingPointError("NaN loss")
    return losses, correct / seen


def returns_a_list_of_tensors(model, optimizer, batches):
    losses, correct, seen = _quiet_loop(model, optimizer, batches)
    return losses, correct.item() / seen


def accuracy_as_a_tensor(model, optimizer, batches):
    losses, correct, seen = _quiet_loop(model, optimizer, batches)
    return torch.stack(losses).tolist(), correct.double() / seen


def no_nan_guard(model, optimizer, batches):
    losses, correct, seen = _quiet_loop(model, optimizer, batches)
    return torch.stack(losses).tolist(), correct.item() / seen


def raises_value_error(model, optimizer, batches):
    losses, correct, seen = _quiet_loop(model, optimizer, batches)
    losses = torch.stack(losses)
    if torch.isnan(losses).any():
        raise ValueError("a loss is NaN")
    return losses.tolist(), correct.item() / seen


def no_optimizer_step(model, optimizer, batches):
    losses, correct, seen = [], 0, 0
    for x, y in batches:
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        losses.append(loss.detach())
        correct += (logits.argmax(1) == y).sum()
        seen += len(y)
    losses = torch.stack(losses)
    if torch.isnan(losses).any():
        raise FloatingPointError("NaN loss")
    return losses.tolist(), correct.item() / seen


def _where(fn, text):
    """The counter's name for the line of ``fn`` that holds ``text``, as a regular expression."""
    lines, first = inspect.getsourcelines(fn)
    number = first + next(i for i, line in enumerate(lines) if text in line)
    return re.escape(f"at line {number} of ")


def _all_verdicts(fn):
    for case in RESULT_CASES:
        ch08.check_results(fn, **case)
    for case in SYNC_CASES:
        ch08.check_no_syncs_in_loop(fn, **case)
    for case in NAN_CASES:
        ch08.check_nan_guard(fn, **case)


@pytest.mark.parametrize("answer", [train_quietly, preallocated, running_sums], ids=lambda fn: fn.__name__)
def test_every_verdict_accepts_right_answers_written_in_several_ways(answer):
    _all_verdicts(answer)


def test_the_noisy_loop_gives_what_the_reference_gives():
    """noisy_epoch is what the verdicts compare with: the reference must agree with it, and it with itself."""
    for case in RESULT_CASES[:2]:
        quiet, noisy = train_quietly(*ch08.make_case(**case)), ch08.noisy_epoch(*ch08.make_case(**case))
        assert quiet[0] == pytest.approx(noisy[0], rel=1e-5) and quiet[1] == noisy[1]
        assert noisy[1] == ch08.noisy_epoch(*ch08.make_case(**case))[1]


def test_make_case_holds_the_sizes_asked_for_and_the_nan():
    model, optimizer, batches = ch08.make_case(batches=5, batch=8, last=3, seed=1, nan_at=2)
    assert [len(y) for _, y in batches] == [8, 8, 8, 8, 3]
    assert [bool(torch.isnan(x).any()) for x, _ in batches] == [False, False, True, False, False]
    assert isinstance(optimizer, torch.optim.SGD)
    assert all(torch.equal(a, b) for a, b in zip(ch08.make_case(5, 8, 3, 1)[0].parameters(), model.parameters()))


@pytest.mark.parametrize("mistake, text", [
    (item_each_step, "loss.item()"),
    (isnan_each_step, "if torch.isnan(loss)"),
    (cpu_each_step, ".cpu()"),
    (to_cpu_each_step, '.to("cpu")'),
    (host_buffer_each_step, "losses[i] = loss.detach()"),
    (tensor_on_device_each_step, "torch.tensor(1.0, device=x.device)"),
    (one_by_one_after, "[float(l) for l in losses]"),
], ids=["item", "isnan", "cpu", "to-cpu", "host-buffer", "tensor-on-device", "one-by-one"])
def test_a_read_per_batch_is_named_with_its_line(mistake, text):
    for case in SYNC_CASES:
        with pytest.raises(CheckFailed, match="a host sync runs once per batch") as info:
            ch08.check_no_syncs_in_loop(mistake, **case)
        message = str(info.value)
        assert re.search(_where(mistake, text), message), message
        few, many = case["few"], case["many"]
        assert f"({few}x with {few} batches, {many}x with {many})" in message
    # the same answers are right otherwise: only the count of reads is wrong
    ch08.check_results(mistake, **RESULT_CASES[1])
    ch08.check_nan_guard(mistake, **NAN_CASES[0])


def test_an_item_per_step_names_item():
    item = r"once per batch: a tensor read as a Python number \(\.item\(\).* at line \d+ of item_each_step\(\)"
    with pytest.raises(CheckFailed, match=item):
        ch08.check_no_syncs_in_loop(item_each_step, **SYNC_CASES[0])
    with pytest.raises(CheckFailed, match=r"\.cpu\(\) at line \d+ of cpu_each_step\(\)"):
        ch08.check_no_syncs_in_loop(cpu_each_step, **SYNC_CASES[0])


def test_a_synchronize_called_in_every_step_is_counted_where_it_is_called():
    with pytest.raises(CheckFailed, match=r"an explicit synchronize \(dev\.synchronize\(\)\).*" + _where(_wait_for, "dev.")):
        ch08.check_no_syncs_in_loop(course_synchronize_each_step, **SYNC_CASES[0])


def test_a_synchronize_written_in_the_loop_is_named_even_where_it_never_runs():
    lines, first = inspect.getsourcelines(guarded_synchronize_each_step)
    line = first + next(i for i, text in enumerate(lines) if "torch.cuda.synchronize()" in text)
    with pytest.raises(CheckFailed, match=rf"calls a synchronize inside its loop \(line {line}\)"):
        ch08.check_no_syncs_in_loop(guarded_synchronize_each_step, **SYNC_CASES[0])
    assert ch08.synchronize_in_loop(train_quietly) == [] and ch08.synchronize_in_loop(print) == []


def test_more_reads_after_the_loop_than_needed_are_named():
    with pytest.raises(CheckFailed, match=r"5 host reads after the loop .*at most 4"):
        ch08.check_no_syncs_in_loop(too_many_reads_after, **SYNC_CASES[0])


def test_accuracy_averaged_over_batches_is_named_where_the_last_batch_is_smaller():
    ch08.check_results(averaged_per_batch, **RESULT_CASES[0])  # batches of one size: the same number, and right
    for case in (RESULT_CASES[1], RESULT_CASES[3]):
        with pytest.raises(CheckFailed, match=r"accuracy: got .*the last batch is smaller.*averaging per-batch"):
            ch08.check_results(averaged_per_batch, **case)


@pytest.mark.parametrize("mistake, words", [
    (returns_tensors, r"losses: got Tensor.*expected a list of Python floats"),
    (returns_a_list_of_tensors, r"losses: got list of \['Tensor'\].*expected a list of Python floats"),
    (accuracy_as_a_tensor, r"accuracy: got Tensor; expected a Python float"),
], ids=["stacked-tensor", "list-of-tensors", "accuracy-tensor"])
def test_tensors_returned_instead_of_floats_are_named(mistake, words):
    with pytest.raises(CheckFailed, match=words):
        ch08.check_results(mistake, **RESULT_CASES[0])


def test_a_missing_nan_guard_is_named():
    for case in NAN_CASES:
        with pytest.raises(CheckFailed, match=rf"batch {case['nan_at']}'s loss is NaN and train_quietly returned "
                                              r"\[.* without raising"):
            ch08.check_nan_guard(no_nan_guard, **case)
    _ = [ch08.check_results(no_nan_guard, **case) for case in RESULT_CASES[:2]]  # right where no loss is NaN


def test_the_wrong_error_is_named():
    with pytest.raises(CheckFailed, match=r"a NaN loss raised ValueError: a loss is NaN; expected FloatingPointError"):
        ch08.check_nan_guard(raises_value_error, **NAN_CASES[0])


def test_a_skipped_optimizer_step_is_named():
    with pytest.raises(CheckFailed, match=r"the loss of batch 1: got .*zero_grad, forward, loss, backward, step"):
        ch08.check_results(no_optimizer_step, **RESULT_CASES[0])
    # one batch: its loss and accuracy are right, only the model shows the missing step
    with pytest.raises(CheckFailed, match=r"differs from the noisy loop's: every batch must make one optimizer step"):
        ch08.check_results(no_optimizer_step, **RESULT_CASES[2])


def test_an_unwritten_stub_is_named_by_every_verdict():
    def train_quietly(model, optimizer, batches):
        raise NotImplementedError()

    for verdict, case in ((ch08.check_results, RESULT_CASES[0]), (ch08.check_no_syncs_in_loop, SYNC_CASES[0]),
                          (ch08.check_nan_guard, NAN_CASES[0])):
        with pytest.raises(CheckFailed, match="`train_quietly` is not written yet"):
            verdict(train_quietly, **case)


def unpatches_the_counter(model, optimizer, batches):
    torch.Tensor.tolist = torch._C.TensorBase.tolist  # torch's own method again: the counter no longer sees it
    losses = []
    for x, y in batches:
        logits, loss = _step(model, optimizer, x, y)
        losses.append(loss.detach().reshape(1).tolist()[0])
    return losses, 0.0


def test_removing_the_counter_while_it_runs_is_refused():
    with pytest.raises(CheckFailed, match="removed the check's sync counter"):
        ch08.check_no_syncs_in_loop(unpatches_the_counter, **SYNC_CASES[0])
    assert "tolist" not in vars(torch.Tensor)  # torch's class is as it was


def divides_as_a_tensor(model, optimizer, batches):
    """Right: the division done by torch (in float32, the default dtype), then read once."""
    losses, correct, seen = _quiet_loop(model, optimizer, batches)
    losses = torch.stack(losses)
    if torch.isnan(losses).any():
        raise FloatingPointError("NaN loss")
    return losses.tolist(), (correct / seen).item()


def test_an_accuracy_divided_in_float32_is_accepted():
    for case in RESULT_CASES:
        ch08.check_results(divides_as_a_tensor, **case)


def last_batch_accuracy(model, optimizer, batches):
    losses = []
    for x, y in batches:
        logits, loss = _step(model, optimizer, x, y)
        losses.append(loss.detach())
        accuracy = (logits.argmax(1) == y).double().mean()  # overwritten each batch: only the last one counts
    losses = torch.stack(losses)
    if torch.isnan(losses).any():
        raise FloatingPointError("NaN loss")
    return losses.tolist(), accuracy.item()


def test_the_per_batch_hint_is_not_given_for_another_accuracy_mistake():
    with pytest.raises(CheckFailed, match="accuracy: got") as info:
        ch08.check_results(last_batch_accuracy, **RESULT_CASES[0])  # 4 batches of 8: no smaller last batch
    assert "last batch is smaller" not in str(info.value)


def tensor_of_the_list(model, optimizer, batches):
    losses, correct, seen = _quiet_loop(model, optimizer, batches)
    losses = torch.tensor(losses)  # reads the list one by one: a device-to-host copy per batch on a GPU
    if torch.isnan(losses).any():
        raise FloatingPointError("NaN loss")
    return losses.tolist(), correct.item() / seen


def test_reading_the_list_with_torch_tensor_is_one_read_per_batch():
    with pytest.raises(CheckFailed, match="once per batch"):
        ch08.check_no_syncs_in_loop(tensor_of_the_list, **SYNC_CASES[0])


# --------------------------------------------------------------------------- exercise 2: compile_pays

#: the grade cells' cases (c028, c029, c030; visible then hidden): compile_s, eager_s, compiled_s, steps
PAYS_CASES = [
    (3.0, [0.5, 0.52, 0.49, 0.5, 0.51], [0.25, 0.26, 0.24, 0.25, 0.25], 100),
    (20.37, [0.1, 0.1, 2.0, 0.1, 0.11], [0.05, 0.05, 0.05, 1.5, 0.05], 1000),
    (1.537, [0.02, 0.021, 0.019], [0.01, 0.011, 0.009], 10),
    (0.0, [0.2, 0.2, 0.2, 0.2], [0.1, 0.1, 0.1, 0.1], 1),
]
NOISE_CASES = [
    (2.0, [0.100, 0.104, 0.097, 0.102], [0.097, 0.1, 0.095, 0.099], 10**6),
    (2.0, [0.1, 0.1, 0.1], [0.2, 0.21, 0.19], 10**6),
    (0.5, [1.0, 1.05, 0.95, 1.0, 1.02], [0.98, 1.0, 0.96, 0.97, 1.0], 50),
    (5.0, [0.3, 0.31, 0.29], [0.6, 0.6, 0.61], 3),
]
DECIDE_CASES = [(3.0, [0.5, 0.5, 0.5], [0.25, 0.25, 0.25], steps) for steps in (12, 13, 14)]
DECIDE_CASES += [(10.0, [0.75, 0.75, 0.75], [0.25, 0.25, 0.25], steps) for steps in (20, 21)]
ALL_PAYS_CASES = PAYS_CASES + NOISE_CASES + DECIDE_CASES


def compile_pays(compile_s, eager_s, compiled_s, steps):
    """The notebook's reference answer (c027)."""
    eager, compiled = statistics.median(eager_s), statistics.median(compiled_s)
    saving = eager - compiled
    verdict = bench.compare(bench.Timing.from_times(compiled_s, label="compiled"),
                            bench.Timing.from_times(eager_s, label="eager"))
    faster = verdict.faster is verdict.a
    if not faster:
        return {"saving_s": saving, "faster": False, "break_even": None, "pays": False}
    break_even = max(1, math.floor(compile_s / saving) + 1)  # strictly shorter from this step count on
    return {"saving_s": saving, "faster": True, "break_even": break_even, "pays": steps >= break_even}


def pays_by_a_while_loop(compile_s, eager_s, compiled_s, steps):
    """Right, written differently: the break-even found by adding steps until the compiled total is shorter."""
    eager, compiled = statistics.median(eager_s), statistics.median(compiled_s)
    verdict = bench.compare(bench.Timing.from_times(compiled_s, label="compiled"),
                            bench.Timing.from_times(eager_s, label="eager"))
    faster = verdict.faster is not None and verdict.faster.label == "compiled"
    break_even = None
    if faster:
        break_even = 1
        while compile_s + break_even * compiled >= break_even * eager:
            break_even += 1
    return {"pays": break_even is not None and steps >= break_even, "break_even": break_even,
            "faster": faster, "saving_s": eager - compiled}


def pays_with_a_float_break_even(compile_s, eager_s, compiled_s, steps):
    """Right, written differently: sorted middles for the medians, 13.0 for 13."""
    def middle(values):
        ordered, half = sorted(values), len(values) // 2
        return ordered[half] if len(ordered) % 2 else (ordered[half - 1] + ordered[half]) / 2

    saving = middle(eager_s) - middle(compiled_s)
    verdict = bench.compare(bench.Timing.from_times(compiled_s), bench.Timing.from_times(eager_s))
    if verdict.faster is not verdict.a:
        return {"saving_s": saving, "faster": False, "break_even": None, "pays": False}
    break_even = max(1.0, math.floor(compile_s / saving) + 1.0)
    return {"saving_s": saving, "faster": True, "break_even": break_even, "pays": bool(steps >= break_even)}


def _changed(**change):
    """compile_pays with one typical mistake: the course's own wrong answer (expected_decision with a switch).

    The reference is taken now, not looked up when the answer runs: while a check runs a learner's answer,
    ``ch08.expected_decision`` is a tripwire (no answer passes by calling it), and under grading the referee
    refuses even this captured copy (tests/unit/grading/test_referee.py)."""
    reference = ch08.expected_decision

    def compile_pays(compile_s, eager_s, compiled_s, steps):
        return reference(compile_s, eager_s, compiled_s, steps, **change)
    return compile_pays


@pytest.mark.parametrize("answer", [compile_pays, pays_by_a_while_loop, pays_with_a_float_break_even],
                         ids=lambda fn: fn.__name__)
def test_the_compile_decision_accepts_right_answers_written_in_several_ways(answer):
    for case in ALL_PAYS_CASES:
        ch08.check_compile_decision(answer, *case)


def test_the_break_even_is_the_first_step_count_strictly_shorter():
    compile_s, eager, compiled = 3.0, 0.5, 0.25
    assert compile_s + 12 * compiled == 12 * eager  # a tie at 12 steps: not paid yet
    assert compile_s + 13 * compiled < 13 * eager
    assert [ch08.expected_decision(*case)["break_even"] for case in DECIDE_CASES] == [13, 13, 13, 21, 21]
    assert [ch08.expected_decision(*case)["pays"] for case in DECIDE_CASES] == [False, True, True, False, True]
    assert [ch08.expected_decision(*case)["faster"] for case in NOISE_CASES] == [False] * 4
    assert ch08.expected_decision(*PAYS_CASES[3])["break_even"] == 1  # nothing to pay back: the first step


def mean_not_median(compile_s, eager_s, compiled_s, steps):
    decision = compile_pays(compile_s, eager_s, compiled_s, steps)
    decision["saving_s"] = statistics.fmean(eager_s) - statistics.fmean(compiled_s)
    return decision


def pays_after_the_break_even(compile_s, eager_s, compiled_s, steps):
    decision = compile_pays(compile_s, eager_s, compiled_s, steps)
    return {**decision, "pays": decision["break_even"] is not None and steps > decision["break_even"]}


@pytest.mark.parametrize("mistake, case, words", [
    (mean_not_median, PAYS_CASES[1], r"saving_s: got 0\.142, expected 0\.05 .*Likely: the mean was used"),
    (_changed(average=statistics.fmean), PAYS_CASES[0], r"saving_s: .*Likely: the mean was used"),
    (_changed(tie_pays=True), DECIDE_CASES[0], r"break_even: got 12, expected 13 .*Likely: .*strictly shorter"),
    (_changed(noise=False), NOISE_CASES[0], r"faster: got True, expected False .*Likely: .*within the noise"),
    (_changed(noise=False), NOISE_CASES[2], r"faster: got True, expected False .*Likely: .*within the noise"),
    (_changed(with_compile=False), DECIDE_CASES[0], r"break_even: got 1, expected 13 .*Likely: the compile time was "
                                                    r"left out"),
    (pays_after_the_break_even, DECIDE_CASES[1], r"pays: got False, expected True .*Likely: compiling pays from the "
                                                 r"break-even step on: `pays` is steps >= break_even"),
], ids=["mean", "fmean", "tie", "noise", "noise-hidden", "compile-time", "pays-after"])
def test_each_typical_compile_mistake_is_named(mistake, case, words):
    with pytest.raises(CheckFailed, match=words) as info:
        ch08.check_compile_decision(mistake, *case)
    assert f", {case[3]} steps)." in str(info.value)  # the case is shown


def test_an_unnamed_mistake_still_says_what_was_expected():
    def double_saving(compile_s, eager_s, compiled_s, steps):
        decision = compile_pays(compile_s, eager_s, compiled_s, steps)
        return {**decision, "saving_s": 2 * decision["saving_s"]}

    with pytest.raises(CheckFailed, match=r"saving_s: got 0\.5, expected 0\.25 ") as info:
        ch08.check_compile_decision(double_saving, *PAYS_CASES[0])
    assert "Likely" not in str(info.value)


@pytest.mark.parametrize("returned, words", [
    ((0.25, True, 13, True), "compile_pays returned tuple; expected a dict"),
    ({"saving_s": 0.25, "faster": True, "pays": True}, r"returned the keys \['faster', 'pays', 'saving_s'\]"),
    ({"saving_s": 0.25, "faster": "yes", "break_even": 13, "pays": True}, r"faster: got 'yes', expected True"),
    ({"saving_s": 0.25, "faster": True, "break_even": 13, "pays": 1}, r"pays: got 1, expected True"),
    ({"saving_s": 0.25, "faster": True, "break_even": True, "pays": True}, r"break_even: got True, expected 13"),
], ids=["tuple", "missing-key", "faster-str", "pays-int", "break-even-bool"])
def test_a_decision_of_the_wrong_shape_or_types_is_refused(returned, words):
    with pytest.raises(CheckFailed, match=words):
        ch08.check_compile_decision(lambda *args: returned, *DECIDE_CASES[1])


def test_no_break_even_is_claimed_within_the_noise():
    def claims_one(compile_s, eager_s, compiled_s, steps):
        return {**compile_pays(compile_s, eager_s, compiled_s, steps), "break_even": 0}

    with pytest.raises(CheckFailed, match=r"break_even: got 0, expected None"):
        ch08.check_compile_decision(claims_one, *NOISE_CASES[1])


def test_an_unwritten_compile_pays_is_named():
    def compile_pays(compile_s, eager_s, compiled_s, steps):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="`compile_pays` is not written yet"):
        ch08.check_compile_decision(compile_pays, *PAYS_CASES[0])


@pytest.mark.parametrize("mean", [statistics.mean, lambda values: sum(values) / len(values)], ids=["mean", "sum-len"])
def test_a_mean_computed_any_way_is_named(mean):
    def compile_pays_by_mean(compile_s, eager_s, compiled_s, steps):
        decision = compile_pays(compile_s, eager_s, compiled_s, steps)
        return {**decision, "saving_s": mean(eager_s) - mean(compiled_s)}

    for case in PAYS_CASES[:2]:
        with pytest.raises(CheckFailed, match="Likely: the mean was used"):
            ch08.check_compile_decision(compile_pays_by_mean, *case)


# --------------------------------------------------------------------------- review 3: W5, N6 (the loop's syncs)

HOST_LOSSES = torch.zeros(64)  # a buffer made in the learner's cell, before the check's counter starts: on the host


def outside_host_buffer_each_step(model, optimizer, batches):
    return _keeping_each_step(model, optimizer, batches, _into_outside_buffer)


def _into_outside_buffer(loss, x):
    HOST_LOSSES[0] = loss.detach()  # a device-to-host copy, every step
    return loss.detach()


def host_total_each_step(model, optimizer, batches):
    losses, correct, seen = _quiet_loop(model, optimizer, batches)
    total = torch.zeros(())
    for loss in losses:
        total += loss  # a host tensor updated from a device tensor: raises on a GPU
    return torch.stack(losses).tolist(), correct.item() / seen


def copy_then_floats(model, optimizer, batches):
    losses, correct, seen = _quiet_loop(model, optimizer, batches)
    on_host = torch.stack(losses).to("cpu")  # one copy; its elements are then read on the host, for free
    if torch.isnan(on_host).any():
        raise FloatingPointError("NaN loss")
    return [float(v) for v in on_host], correct.item() / seen


def test_a_host_buffer_made_before_the_check_is_a_copy_to_the_host_each_step():
    with pytest.raises(CheckFailed, match="a host sync runs once per batch: a blocking copy to the host") as info:
        ch08.check_no_syncs_in_loop(outside_host_buffer_each_step, **SYNC_CASES[0])
    assert re.search(_where(_into_outside_buffer, "HOST_LOSSES[0] ="), str(info.value)), str(info.value)


def test_a_host_tensor_updated_from_a_device_tensor_fails_as_what_raises_on_a_gpu():
    with pytest.raises(CheckFailed, match=r"an in-place operation \(add_\) on a host tensor .*on a GPU this raises") \
            as info:
        ch08.check_no_syncs_in_loop(host_total_each_step, **SYNC_CASES[0])
    assert re.search(_where(host_total_each_step, "total += loss"), str(info.value)), str(info.value)


@pytest.mark.parametrize("case", SYNC_CASES)
def test_a_copy_to_the_host_then_its_elements_read_one_by_one_is_one_read(case):
    ch08.check_no_syncs_in_loop(copy_then_floats, **case)
    ch08.check_results(copy_then_floats, **RESULT_CASES[1])


def _sync_when_there_is_a_gpu():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


WAIT = torch.cuda.synchronize  # a synchronize under another name


def alias_each_step(model, optimizer, batches):
    wait = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    losses = []
    for x, y in batches:
        _logits, loss = _step(model, optimizer, x, y)
        wait()
        losses.append(loss.detach())
    return losses


def helper_each_step(model, optimizer, batches):
    for x, y in batches:
        _step(model, optimizer, x, y)
        _sync_when_there_is_a_gpu()


def global_alias_each_step(model, optimizer, batches):
    for x, y in batches:
        _step(model, optimizer, x, y)
        if torch.cuda.is_available():
            WAIT()


def periodic_synchronize(model, optimizer, batches):
    for i, (x, y) in enumerate(batches):
        _step(model, optimizer, x, y)
        if i % 1000 == 999 and torch.cuda.is_available():  # rarely: left to the counter, where it runs
            torch.cuda.synchronize()
    torch.cuda.synchronize() if torch.cuda.is_available() else None  # after the loop: once


def _line(fn, text):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.parametrize("fn, text", [(alias_each_step, "wait()"), (helper_each_step, "_sync_when_there_is_a_gpu()"),
                                      (global_alias_each_step, "WAIT()")])
def test_a_synchronize_reached_through_an_alias_or_a_helper_is_found_in_the_loop(fn, text):
    assert ch08.synchronize_in_loop(fn) == [_line(fn, text)]
    with pytest.raises(CheckFailed, match=rf"calls a synchronize inside its loop \(line {_line(fn, text)}\)"):
        ch08.check_no_syncs_in_loop(fn, **SYNC_CASES[0])


def test_a_synchronize_that_the_step_guards_or_that_follows_the_loop_is_not_named():
    assert ch08.synchronize_in_loop(periodic_synchronize) == []
