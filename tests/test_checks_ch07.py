"""helpers.checks.ch07: each verdict passes a correct answer and names the symptom of each planted bug."""

import json
import time

import pytest
import torch
import torch.nn.functional as F

from helpers import troubleshoot as ts
from helpers.checks import CheckFailed
from helpers.checks import ch07


def train_epoch(model, optimizer, batches, device):
    model.to(device)
    total = 0.0
    for x, y in batches:
        x, y = x.to(device), (y - 1).to(device)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(batches)


def broken_epoch(model, optimizer, batches, device):
    model.to(device)
    total = 0
    for x, y in batches:
        probs = torch.softmax(model(x), dim=1)
        loss = -torch.log(probs[torch.arange(len(y)), y]).mean()
        loss.backward()
        optimizer.step()
        total += loss
    return total / len(batches)


def evaluate(model, batches, device):
    with torch.no_grad():
        hits = sum(((model(x).argmax(1) + 1) == y).sum().item() for x, y in batches)
    return hits / sum(len(y) for _, y in batches)


def evaluate_with_grad(model, batches, device):
    hits = sum(((model(x).argmax(1) + 1) == y).sum().item() for x, y in batches)
    return hits / sum(len(y) for _, y in batches)


TRAIN_CHECKS = {
    "labels out of range": ch07.check_labels,
    "different devices": ch07.check_same_device,
    "gradients accumulate": ch07.check_zero_grad,
    "memory grows": ch07.check_memory_flat,
    "log(0)": ch07.check_finite,
    "labels out of range (numbered": ch07.check_learns,
}


@pytest.mark.parametrize("symptom", list(TRAIN_CHECKS))
def test_train_checks_pass_the_fix_and_name_the_broken_scripts_symptom(symptom):
    verdict = TRAIN_CHECKS[symptom]
    verdict(train_epoch, features=6, classes=4, seed=1)
    with pytest.raises(CheckFailed, match=None) as info:
        verdict(broken_epoch, features=6, classes=4, seed=1)
    assert symptom.lower() in str(info.value).lower()


def test_eval_check_passes_no_grad_and_names_its_absence():
    ch07.check_eval_no_grad(evaluate, features=6, classes=4, seed=1)
    with pytest.raises(CheckFailed, match="without no_grad"):
        ch07.check_eval_no_grad(evaluate_with_grad, features=6, classes=4, seed=1)
    assert torch.is_grad_enabled()


def test_memory_check_lets_the_previous_steps_graph_live():
    """`loss` still holds the last step's graph when the next forward starts: that is not a leak."""
    def keeps_last(model, optimizer, batches, device):
        last = None
        for x, y in batches:
            optimizer.zero_grad()
            last = F.cross_entropy(model(x), y - 1)
            last.backward()
            optimizer.step()
        return last.item()

    ch07.check_memory_flat(keeps_last, features=5, classes=3, seed=2)


def test_a_constant_answer_is_told_it_never_ran_the_model():
    with pytest.raises(CheckFailed, match="never ran the model"):
        ch07.check_finite(lambda *a: 1.0, features=5, classes=3, seed=0)


def diagnose(err):
    text = str(err).lower()
    if "out of memory" in text:
        return "memory", "Use a smaller batch."
    if "size of tensor" in text:
        return "shape", "Reshape the input."
    if "device-side assert" in text:
        return "index", "Check the labels' range."
    return "unknown", "Read the traceback."


def test_diagnoses_pass_a_correct_table_and_name_the_sources_mistake():
    cases = [(RuntimeError(ts.CUDA_TEXTS["device-side assert"]["text"]), "index"),
             (ch07.caught(lambda: torch.ones(2) + torch.ones(3)), "shape")]
    ch07.check_diagnoses(diagnose, cases)
    ch07.check_fixes_named(diagnose, cases)
    with pytest.raises(CheckFailed, match="out-of-range index"):
        ch07.check_diagnoses(lambda e: ("nan", "clip"), cases[:1])
    with pytest.raises(CheckFailed, match="tuple"):
        ch07.check_diagnoses(lambda e: "index", cases[:1])


def test_fixes_must_differ_and_name_the_change():
    cases = [(ch07.caught(lambda: torch.ones(2) + torch.ones(3)), "shape"),
             (torch.OutOfMemoryError("CUDA out of memory."), "memory")]

    def same(err):
        return diagnose(err)[0], "Check the shape and the batch size."

    with pytest.raises(CheckFailed, match="same fix"):
        ch07.check_fixes_named(same, cases)
    with pytest.raises(CheckFailed, match="names none of"):
        ch07.check_fixes_named(lambda e: (diagnose(e)[0], "Try again."), cases)


def test_caught_keeps_anomaly_warnings_off_stderr(capfd):
    def nan():
        x = torch.tensor([-1.0], requires_grad=True)
        with torch.autograd.detect_anomaly():
            torch.sqrt(x).backward()

    err = ch07.caught(nan)
    assert "nan values" in str(err)
    assert capfd.readouterr().err == ""


def profile_regions(regions, trace_path):
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for name, fn in regions.items():
            with record_function(name):
                fn()
    prof.export_chrome_trace(str(trace_path))
    events = json.load(open(trace_path))["traceEvents"]
    totals = {n: sum(e["dur"] for e in events if e.get("name") == n and e.get("ph") == "X") for n in regions}
    return max(totals, key=totals.get)


def test_profile_checks_pass_a_correct_answer_and_keep_stderr_clean(capfd):
    durations = {"a": 0.002, "b": 0.02}
    ch07.check_trace_names(profile_regions, durations)
    ch07.check_slowest_region(profile_regions, durations)
    assert capfd.readouterr().err == ""


def test_profile_checks_name_a_missing_trace_and_the_fastest():
    def timed(regions, trace_path):
        seconds = {}
        for name, fn in regions.items():
            start = time.perf_counter()
            fn()
            seconds[name] = time.perf_counter() - start
        return min(seconds, key=seconds.get)

    with pytest.raises(CheckFailed, match="no trace file"):
        ch07.check_trace_names(timed, {"a": 0.002, "b": 0.02})
    with pytest.raises(CheckFailed, match="fastest"):
        ch07.check_slowest_region(timed, {"a": 0.002, "b": 0.02})


def test_the_slowest_region_is_the_traces_not_the_durations_asked_for(monkeypatch):
    """On a busy grader a 4 ms sleep can take longer than a 50 ms one: an answer that reads the trace names the
    region the trace says is slowest, and keeps its points (a loaded CI run once took them)."""
    monkeypatch.setattr(ch07.troubleshoot, "region_totals", lambda path, names: {"first_is_slow": 54.6, "x": 56.1})

    def reads_the_trace(regions, trace_path):
        profile_regions(regions, trace_path)
        return "x"  # what the trace said

    ch07.check_slowest_region(reads_the_trace, {"first_is_slow": 0.05, "x": 0.004})
    with pytest.raises(CheckFailed, match="the slowest region is 'x'"):
        ch07.check_slowest_region(lambda regions, path: profile_regions(regions, path) and "first_is_slow",
                                  {"first_is_slow": 0.05, "x": 0.004})


def test_the_course_version_is_a_tripwire_in_the_profile_check():
    def profile_regions(regions, trace_path):  # the exercise's name: solved() arms the tripwire for it
        return ts.profile_regions(regions, trace_path)

    with pytest.raises(CheckFailed, match="write it yourself"):
        ch07.check_slowest_region(profile_regions, {"a": 0.001, "b": 0.01})
