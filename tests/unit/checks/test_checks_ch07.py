"""helpers.checks.ch07: each verdict passes a correct answer and names the symptom of each planted bug."""

import json
import re
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


def test_a_fix_written_in_korean_names_the_change_too():
    """The Korean edition's learners write the fix sentence in Korean: it counts as an English one does."""
    cases = [(ch07.caught(lambda: torch.ones(2) + torch.ones(3)), "shape"),
             (torch.OutOfMemoryError("CUDA out of memory."), "memory")]
    korean = {"shape": "두 텐서의 모양을 맞추십시오.", "memory": "배치 크기를 줄이거나 혼합 정밀도를 쓰십시오."}
    ch07.check_fixes_named(lambda e: (diagnose(e)[0], korean[diagnose(e)[0]]), cases)
    with pytest.raises(CheckFailed, match="names none of"):
        ch07.check_fixes_named(lambda e: (diagnose(e)[0], "다시 해 보십시오."), cases)


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
        return max(seconds, key=seconds.get)

    def fastest(regions, trace_path):
        profile_regions(regions, trace_path)
        totals = ts.region_totals(trace_path, list(regions))
        return min(totals, key=totals.get)

    with pytest.raises(CheckFailed, match="no trace file"):
        ch07.check_trace_names(timed, {"a": 0.002, "b": 0.02})
    with pytest.raises(CheckFailed, match="fastest"):
        ch07.check_slowest_region(fastest, {"a": 0.002, "b": 0.02})


def clocked(regions, trace_path):
    """Profiles and exports as asked, then answers from time.perf_counter instead of the trace (issue 22)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    seconds = {}
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for name, fn in regions.items():
            with record_function(name):
                start = time.perf_counter()
                fn()
                seconds[name] = time.perf_counter() - start
    prof.export_chrome_trace(str(trace_path))
    return max(seconds, key=seconds.get)


def test_an_answer_timed_with_a_python_clock_is_told_to_read_the_trace():
    durations = {"load_batch": 0.004, "forward": 0.03, "optimizer_step": 0.008}
    ch07.check_trace_names(clocked, durations)  # it profiles and exports: only the reading is wrong
    with pytest.raises(CheckFailed, match="follows a Python clock, not the trace"):
        ch07.check_slowest_region(clocked, durations)
    assert time.perf_counter() < 1e9 and abs(time.time() - time.monotonic()) > 0  # the clocks are put back


def test_a_clock_imported_by_name_runs_ahead_too():
    namespace = {}
    exec("from time import perf_counter\n"
         "def profile_regions(regions, trace_path):\n"
         "    seconds = {}\n"
         "    for name, fn in regions.items():\n"
         "        start = perf_counter(); fn(); seconds[name] = perf_counter() - start\n"
         "    return max(seconds, key=seconds.get)\n", namespace)
    real = namespace["perf_counter"]
    with pytest.raises(CheckFailed, match="Python clock"):
        ch07.check_slowest_region(namespace["profile_regions"], {"a": 0.002, "b": 0.02})
    assert namespace["perf_counter"] is real is time.perf_counter


def test_an_answer_from_key_averages_keeps_its_points():
    from torch.profiler import ProfilerActivity, profile, record_function

    def from_key_averages(regions, trace_path):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for name, fn in regions.items():
                with record_function(name):
                    fn()
        prof.export_chrome_trace(str(trace_path))
        return max((e for e in prof.key_averages() if e.key in regions), key=lambda e: e.cpu_time_total).key

    ch07.check_slowest_region(from_key_averages, {"a": 0.002, "b": 0.02})


def test_each_region_runs_once():
    def twice(regions, trace_path):
        profile_regions(regions, trace_path)
        return profile_regions(regions, trace_path)

    with pytest.raises(CheckFailed, match="once each"):
        ch07.check_trace_names(twice, {"forward": 0.002, "optimizer_step": 0.004})
    ch07.check_slowest_region(twice, {"forward": 0.002, "optimizer_step": 0.02})  # the answer itself is right


@pytest.mark.parametrize("mistake, says", [
    ("inside", "inside the `with profile(...)` block"),
    ("path", "pathlib.Path"),
    ("empty", "empty collection"),
])
def test_profile_mistakes_get_a_message_not_a_bare_traceback(mistake, says):
    from pathlib import Path

    from torch.profiler import ProfilerActivity, profile, record_function

    def wrong(regions, trace_path):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for name, fn in regions.items():
                with record_function(name):
                    fn()
            if mistake == "inside":
                prof.export_chrome_trace(str(trace_path))
        prof.export_chrome_trace(Path(trace_path) if mistake == "path" else str(trace_path))
        events = json.load(open(trace_path))["traceEvents"]
        totals = {e["name"]: e["dur"] for e in events if e.get("cat") == "cpu_op"}  # the wrong category
        return max(totals, key=totals.get)

    for verdict in (ch07.check_trace_names, ch07.check_slowest_region):
        with pytest.raises(CheckFailed, match=re.escape(says)):
            verdict(wrong, {"a": 0.001, "b": 0.002})


def test_alphabetical_max_is_named():
    def by_name(regions, trace_path):
        profile_regions(regions, trace_path)
        totals = ts.region_totals(trace_path, list(regions))
        return max(totals)

    with pytest.raises(CheckFailed, match="alphabetical"):
        ch07.check_slowest_region(by_name, {"load_batch": 0.006, "forward": 0.03, "optimizer_step": 0.002})


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


def variant(loss_of=None, zero_after_backward=False, returns_tensor=False, skips_nonfinite=False):
    """train_epoch with one mistake planted."""
    def epoch(model, optimizer, batches, device):
        model.to(device)
        total, steps = 0.0, 0
        for x, y in batches:
            x, y = x.to(device), (y - 1).to(device)
            if not zero_after_backward:
                optimizer.zero_grad()
            logits = model(x)
            loss = loss_of(logits, y) if loss_of else F.cross_entropy(logits, y)
            if skips_nonfinite and not torch.isfinite(loss):
                continue
            loss.backward()
            if zero_after_backward:
                optimizer.zero_grad()
            optimizer.step()
            total, steps = total + (loss.detach() if returns_tensor else loss.item()), steps + 1
        return total / (steps if skips_nonfinite else len(batches))

    return epoch


def clamped(logits, y):
    return -torch.log(torch.softmax(logits, dim=1).clamp_min(1e-12))[torch.arange(len(y)), y].mean()


def log_of_softmax(logits, y):
    return -torch.log(torch.softmax(logits, dim=1))[torch.arange(len(y)), y].mean()


def test_clamped_probabilities_are_caught_with_huge_logits():
    ch07.check_finite(variant(lambda lg, y: F.nll_loss(F.log_softmax(lg, dim=1), y)), features=8, classes=4, seed=0)
    with pytest.raises(CheckFailed, match="Clamping the probabilities"):
        ch07.check_finite(variant(clamped), features=8, classes=4, seed=0)
    ch07.check_learns(variant(clamped), features=8, classes=4, seed=0)  # small logits: only the NaN check sees it


def test_skipping_nonfinite_steps_is_named():
    with pytest.raises(CheckFailed, match="Skipping non-finite steps"):
        ch07.check_finite(variant(log_of_softmax, skips_nonfinite=True), features=8, classes=4, seed=0)


def test_zero_grad_between_backward_and_step_fails_the_zero_grad_check():
    with pytest.raises(CheckFailed, match="between loss.backward\\(\\) and optimizer.step\\(\\)"):
        ch07.check_zero_grad(variant(zero_after_backward=True), features=8, classes=4, seed=0)
    with pytest.raises(CheckFailed, match="zero_grad"):
        ch07.check_learns(variant(zero_after_backward=True), features=8, classes=4, seed=0)


def test_a_tensor_where_a_float_is_asked_costs_the_learns_cell_only():
    tensor_epoch = variant(returns_tensor=True)
    with pytest.raises(CheckFailed, match="Python float"):
        ch07.check_learns(tensor_epoch, features=8, classes=4, seed=0)
    for verdict in (ch07.check_labels, ch07.check_finite, ch07.check_memory_flat):
        verdict(tensor_epoch, features=8, classes=4, seed=0)


def test_diagnose_mistakes_are_named():
    oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB.")

    def host_memory_only(err):
        return ("memory", "Use a smaller batch.") if isinstance(err, MemoryError) else ("shape", "Reshape.")

    with pytest.raises(CheckFailed, match="torch.OutOfMemoryError .*subclasses RuntimeError, not Python's MemoryError"):
        ch07.check_diagnoses(host_memory_only, [(oom, "memory")])
    with pytest.raises(CheckFailed, match="does not remove the cause"):
        ch07.check_fixes_named(lambda e: ("memory", "Free memory with torch.cuda.empty_cache()."), [(oom, "memory")])
    with pytest.raises(CheckFailed, match="not one of the table's categories"):
        ch07.check_diagnoses(lambda e: ("no_cuda", "Check torch.cuda.is_available()."),
                             [(AssertionError("Torch not compiled with CUDA enabled"), "no-cuda")])
    ch07.check_fixes_named(lambda e: ("memory", "For example, halve the batch, then call empty_cache()."),
                           [(oom, "memory")])
    with pytest.raises(CheckFailed, match="names none of"):  # the "amp" of "example" is not autocast
        ch07.check_fixes_named(lambda e: ("memory", "For example, try again."), [(oom, "memory")])
