"""helpers.troubleshoot: reproductions, diagnoses, OOM reading, NaN tools, NVML guard, traces, TensorBoard."""

import json
import os
import re
import sys
import time
import urllib.request

import pytest
import torch
from torch import nn

from support.layout import no_child_left
from helpers import benchmark as bench
from helpers import troubleshoot as ts


@pytest.mark.parametrize("name, exc_type, words, category", [
    ("label >= classes", IndexError, "Target 10 is out of bounds", "index"),
    ("negative label", IndexError, "Target -5 is out of bounds", "index"),
    ("embedding index", IndexError, "index out of range in self", "index"),
    ("tensor index", IndexError, "index 7 is out of bounds", "index"),
    ("BCELoss outside [0, 1]", RuntimeError, "between 0 and 1", "range"),
    # torch 2.13's words, then 2.11's (the course's floor): the diagnosis must read both
    ("float targets", RuntimeError, "expected target dtype|expected scalar type Long", "dtype"),
    ("dtype mismatch", RuntimeError, "same dtype", "dtype"),
    ("shape mismatch", RuntimeError, "cannot be multiplied", "shape"),
    ("device mismatch", RuntimeError, "expected device", "device"),
    ("batch size mismatch", ValueError, "Expected input batch_size", "shape"),
])
def test_each_mistake_raises_the_documented_error_and_is_explained(name, exc_type, words, category):
    err = ts.reproduce(name)
    assert type(err) is exc_type and re.search(words, str(err)), f"{type(err).__name__}: {err}"
    assert ts.explain_error(err).category == category


def test_reproduce_refuses_an_unknown_name():
    with pytest.raises(KeyError, match="choose one of"):
        ts.reproduce("no such mistake")


@pytest.mark.parametrize("err, category", [
    (RuntimeError(ts.CUDA_TEXTS["device-side assert"]["text"]), "index"),  # not NaN, whatever the source says
    (RuntimeError(ts.CUDA_TEXTS["broken context"]["text"]), "index"),
    (torch.OutOfMemoryError("anything at all"), "memory"),
    (RuntimeError(ts.OOM_FORMAT), "memory"),
    (ValueError("Expected input batch_size (4) to match target batch_size (3)."), "shape"),
    (RuntimeError("Function 'SqrtBackward0' returned nan values in its 0th output."), "nan"),
    (AssertionError("Torch not compiled with CUDA enabled"), "no-cuda"),
])
def test_explain_error_reads_cuda_texts_and_messages(err, category):
    assert ts.explain_error(err).category == category


def test_explain_error_says_none_for_an_unrelated_error():
    assert ts.explain_error(KeyError("config")) is None


def test_chapter_02_explains_device_errors_in_chapter_07s_words():
    from helpers import device as dev

    for err in (ts.reproduce("device mismatch"), RuntimeError("Torch not compiled with CUDA enabled")):
        found, said = ts.explain_error(err), dev.explain_device_error(err)
        assert found.cause in said and found.fix in said  # one table of rules (helpers.errors), read by both


def test_cuda_texts_name_their_source():
    for entry in ts.CUDA_TEXTS.values():
        assert "pytorch/pytorch#" in entry["source"] and entry["text"]


def test_oom_lines_explain_every_sentence_of_the_format():
    lines = ts.oom_lines(ts.OOM_FORMAT)
    assert len(lines) >= 6
    assert all(meaning for _, meaning in lines), [s for s, m in lines if not m]
    assert any("expandable_segments" in sentence for sentence, _ in lines)


def test_oom_format_holds_placeholders_not_numbers():
    import re

    assert not re.search(r"\d+\.\d+ [GM]iB", ts.OOM_FORMAT)
    assert "<A MiB>" in ts.OOM_FORMAT


def test_cuda_memory_report_without_cuda_says_what_is_missing():
    if torch.cuda.is_available():
        assert "mem_get_info" in ts.cuda_memory_report("cuda")
    else:
        assert "no CUDA device" in ts.cuda_memory_report("cpu")


def test_cuda_assert_in_subprocess_refuses_without_cuda():
    if torch.cuda.is_available():
        assert "device-side assert" in ts.cuda_assert_in_subprocess()
    else:
        with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
            ts.cuda_assert_in_subprocess()


def test_forget_last_error_clears_what_python_keeps(monkeypatch):
    err = RuntimeError("x")
    monkeypatch.setattr(sys, "last_value", err, raising=False)
    monkeypatch.setattr(sys, "last_traceback", None, raising=False)
    cleared = ts.forget_last_error()
    assert "sys.last_value" in cleared and sys.last_value is None


def test_nonfinite_grads_names_the_parameter():
    model = nn.Linear(2, 1)
    model(torch.ones(1, 2)).sum().backward()
    assert ts.nonfinite_grads(model) == []
    model.bias.grad.fill_(float("inf"))
    assert ts.nonfinite_grads(model) == ["bias"]


def test_train_losses_diverge_at_a_large_rate_and_clipping_tames_them():
    from helpers.models import MLP, make_regression

    x, y = make_regression(n=128, in_features=8, seed=0)
    x = x * 10
    torch.manual_seed(0)
    wild = ts.train_losses(MLP(8, 32, 1), x, y, lr=0.5, steps=25)
    torch.manual_seed(0)
    clipped = ts.train_losses(MLP(8, 32, 1), x, y, lr=0.5, steps=25, clip=1.0)
    assert not torch.isfinite(torch.tensor(wild)).all()
    assert torch.isfinite(torch.tensor(clipped)).all() and clipped[-1] < clipped[0]


def test_numbered_class_batches_number_classes_from_one():
    batches = ts.numbered_class_batches(3, 16, features=4, classes=5, seed=1)
    y = torch.cat([b[1] for b in batches])
    assert len(batches) == 3 and int(y.min()) >= 1 and int(y.max()) <= 5
    with pytest.raises(ValueError):
        ts.numbered_class_batches(0)


def test_nvml_raises_nvml_error_without_a_driver():
    import pynvml

    import shutil

    try:
        readings = ts.nvml_readings()
    except pynvml.NVMLError as err:
        assert not torch.cuda.is_available(), f"CUDA works, yet NVML failed: {err}"
        if shutil.which("nvidia-smi") is None:  # no driver at all: the documented error
            assert isinstance(err, pynvml.NVMLError_LibraryNotFound)
    else:
        assert readings and all(r.total_bytes > 0 for r in readings)


def test_cpu_readings_report_every_core():
    import psutil

    reading = ts.cpu_readings(lambda: sum(i * i for i in range(20000)))
    assert len(reading["per_core"]) == psutil.cpu_count()
    assert 0 <= reading["mean"] <= 100 and reading["rss_after"] > 0


def test_slow_dataset_waits_per_item_and_refuses_bad_sizes():
    data = ts.SlowDataset(n=4, features=3, classes=2, delay_s=0.0)
    x, y = data[0]
    assert x.shape == (3,) and 0 <= int(y) < 2 and len(data) == 4
    with pytest.raises(ValueError):
        ts.SlowDataset(n=0)


def test_native_stderr_captures_file_descriptor_2():
    with ts.native_stderr() as log:
        os.write(2, b"from C++\n")
    assert log.lines == ["from C++"]


def test_profile_regions_writes_a_readable_trace_naming_the_regions(tmp_path):
    path = tmp_path / "trace.json"
    slowest = ts.profile_regions({"quick": lambda: time.sleep(0.001), "slow": lambda: time.sleep(0.02)}, path)
    assert slowest == "slow"
    data = json.loads(path.read_text())
    names = {e.get("name") for e in data["traceEvents"] if e.get("cat") == "user_annotation"}
    assert {"quick", "slow"} <= names
    totals = ts.region_totals(path)
    assert totals["slow"] > totals["quick"] > 0


def test_region_timings_make_each_call_a_repeat_for_the_verdicts():
    def event(name, ms):
        return {"cat": "user_annotation", "ph": "X", "name": name, "dur": ms * 1000}

    steps = [("data", 80), ("backward", 2), ("data", 81), ("backward", 40), ("data", 79), ("backward", 3)]
    trace = {"traceEvents": [event(n, ms) for n, ms in steps] + [event("ProfilerStep#1", 500)]}
    timings = ts.region_timings(trace, ["data", "backward", "never"])
    assert timings["data"].times == pytest.approx([0.080, 0.081, 0.079]) and timings["data"].label == "data"
    assert timings["backward"].median == pytest.approx(0.003)
    assert len(timings["never"].times) == 1 and timings["never"].median != timings["never"].median  # nan: not run
    from helpers.benchmark import describe_leader

    verdict = describe_leader([timings["data"], timings["backward"]], "slowest region", slowest=True)
    assert verdict.startswith("the slowest region is data: data takes")


def test_region_totals_refuses_what_is_not_a_trace(tmp_path):
    with pytest.raises(ValueError, match="not a Chrome trace"):
        ts.region_totals({"events": []})
    with pytest.raises(ValueError, match="no record_function regions"):
        ts.slowest_region({"traceEvents": []})


def test_log_training_writes_event_files_that_read_back(tmp_path):
    from torch.utils.data import DataLoader
    from torch.utils.tensorboard import SummaryWriter

    torch.manual_seed(0)
    model = nn.Linear(8, 3)
    writer = SummaryWriter(str(tmp_path))
    loader = DataLoader(ts.SlowDataset(n=32, features=8, classes=3, delay_s=0.0), batch_size=8)
    steps = ts.log_training(writer, model, torch.optim.SGD(model.parameters(), lr=0.1), loader, torch.device("cpu"))
    writer.close()
    assert steps == 4
    assert list(tmp_path.glob("events.out.tfevents.*"))
    for tag in ("loss/train", "throughput/samples_per_s", "memory/peak_MiB"):
        points = ts.read_scalars(tmp_path, tag)
        assert [s for s, _ in points] == [0, 1, 2, 3] and all(v >= 0 for _, v in points)
    with pytest.raises(KeyError, match="no scalar"):
        ts.read_scalars(tmp_path, "nope")


def test_serve_tensorboard_serves_the_logs_and_leaves_no_process(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path))
    writer.add_scalar("loss/train", 1.0, 0)
    writer.close()
    with no_child_left(), ts.serve_tensorboard(tmp_path) as url:  # no TensorBoard server left running
        tags = json.loads(urllib.request.urlopen(url + "data/plugin/scalars/tags", timeout=30).read())
    assert "loss/train" in next(iter(tags.values()))


def test_runs_folder_honours_course_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    assert ts.runs_folder("07_x") == tmp_path / "07_x" and (tmp_path / "07_x").is_dir()


@pytest.mark.gpu
def test_a_real_cuda_oom_message_reads_sentence_by_sentence():
    free, total = torch.cuda.mem_get_info()
    with pytest.raises(torch.OutOfMemoryError) as info:
        torch.empty(total + 2**30, dtype=torch.uint8, device="cuda")
    lines = ts.oom_lines(str(info.value))
    assert any("Tried to allocate" in s for s, _ in lines)
    assert all(meaning for sentence, meaning in lines if "allocate" in sentence or "capacity" in sentence)
    assert ts.explain_error(info.value).category == "memory"


@pytest.mark.gpu
def test_a_real_device_side_assert_breaks_only_the_child_process():
    text = ts.cuda_assert_in_subprocess(blocking=True)
    assert "device-side assert" in text and "AFTERWARDS" in text
    assert torch.ones(1, device="cuda").item() == 1.0  # this process's CUDA context is fine


def test_stop_at_nonfinite_names_the_first_module_and_removes_its_hooks():
    class Log(nn.Module):
        def forward(self, x):
            return torch.log(x)

    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), Log(), nn.Linear(8, 1))
    x = torch.randn(16, 4)
    with pytest.raises(RuntimeError, match=r"non-finite output \(Inf\) from module '2' \(Log\)") as info:
        with ts.stop_at_nonfinite(model):
            model(x)
    assert ts.explain_error(info.value).category == "nan"
    assert all(not m._forward_hooks for m in model.modules())
    with ts.stop_at_nonfinite(model[:2]):  # finite: nothing raised
        model[:2](x)


def _x(name, cat, ts, dur):
    return {"name": name, "cat": cat, "ph": "X", "ts": ts, "dur": dur}


def test_device_activity_unions_kernels_and_finds_the_idle_gaps():
    """Issue 23, finding 9: on a GPU, the device's busy time against the steps' wall time, from a trace (microseconds)."""
    trace = {"traceEvents": [
        _x("ProfilerStep#1", "user_annotation", 0, 1000), _x("ProfilerStep#2", "user_annotation", 1000, 1000),
        _x("data", "user_annotation", 0, 600),  # a CPU span: not device work
        _x("sgemm", "kernel", 600, 200), _x("relu", "kernel", 700, 200),  # overlapping: counted once, 600-900
        _x("Memcpy HtoD", "gpu_memcpy", 1700, 100), _x("adam", "kernel", 1900, 300)]}  # the last ends after the step
    act = ts.device_activity(trace)
    assert act.device_events == 4
    assert act.window_s == pytest.approx(2200e-6) and act.busy_s == pytest.approx(700e-6)
    assert act.idle_s == pytest.approx(1500e-6) and act.busy_fraction == pytest.approx(700 / 2200)
    assert act.gaps[0] == (pytest.approx(900e-6), pytest.approx(800e-6))  # longest first: 900-1700
    assert [round(g[1] * 1e6) for g in act.gaps] == [800, 600, 100]


def test_device_activity_of_a_cpu_profile_says_there_was_no_device_work():
    trace = {"traceEvents": [_x("ProfilerStep#1", "user_annotation", 0, 500), _x("aten::mm", "cpu_op", 10, 400)]}
    act = ts.device_activity(trace)
    assert act.device_events == 0 and act.busy_s == 0 and act.gaps == [] and act.window_s == pytest.approx(500e-6)


def _launch(name, thread, ts, correlation, cat="cuda_runtime"):
    return {"name": name, "cat": cat, "ph": "X", "pid": 7, "tid": thread, "ts": ts, "dur": 5,
            "args": {"cbid": 211, "correlation": correlation}}


def _device_work(name, ts, dur, correlation, cat="kernel"):
    return {"name": name, "cat": cat, "ph": "X", "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": 7, "correlation": correlation}}


def test_region_device_times_follow_each_kernel_to_the_region_that_launched_it():
    """gpu-review-2 finding 1: backward's kernels are launched by autograd's device thread, not the region's."""
    main, autograd_thread = 100, 200
    trace = {"traceEvents": [
        _x("ProfilerStep#1", "user_annotation", 0, 1000) | {"tid": main},
        _x("forward", "user_annotation", 0, 300) | {"tid": main},
        _launch("cudaLaunchKernel", main, 10, correlation=1), _device_work("sgemm", 20, 40, correlation=1),
        _launch("cudaMemcpyAsync", main, 50, correlation=2), _device_work("Memcpy HtoD", 60, 10, 2, "gpu_memcpy"),
        _x("backward", "user_annotation", 300, 400) | {"tid": main},  # waits while the other thread launches
        _launch("cudaLaunchKernel", main, 310, correlation=3), _device_work("fill", 320, 2, correlation=3),
        _launch("cudaLaunchKernel", autograd_thread, 350, correlation=4), _device_work("sgemm", 360, 100, 4),
        _launch("cuLaunchKernel", autograd_thread, 500, 5, "cuda_driver"), _device_work("triton_", 510, 30, 5),
        _device_work("Memset", 600, 8, correlation=6, cat="gpu_memset"),
        _launch("cudaMemsetAsync", autograd_thread, 590, correlation=6),
        _x("gpu_user_annotation backward", "gpu_user_annotation", 320, 300),  # the GPU's own row: not a launch
        _launch("cudaLaunchKernel", main, 800, correlation=7), _device_work("adam", 810, 50, correlation=7),  # outside
        _launch("cudaStreamSynchronize", main, 900, correlation=8),  # queues no device work
        _device_work("orphan", 950, 70, correlation=99),  # its launch is not in the trace
    ]}
    times = ts.region_device_times(trace, ["forward", "backward", "optimizer_step"])
    assert times["forward"] == pytest.approx(50e-6)
    assert times["backward"] == pytest.approx((2 + 100 + 30 + 8) * 1e-6)  # 140 us, of which 138 from the other thread
    assert times["optimizer_step"] == 0.0  # never ran
    everything = ts.region_device_times(trace)  # every region; a nested one counts for both
    assert everything["ProfilerStep#1"] == pytest.approx((50 + 140 + 50) * 1e-6)  # not the orphan
    assert set(everything) == {"ProfilerStep#1", "forward", "backward"}


def test_region_device_times_sum_the_calls_of_a_region():
    trace = {"traceEvents": [
        _x("backward", "user_annotation", 0, 100), _launch("k", 1, 10, 1), _device_work("k", 10, 7, 1),
        _x("backward", "user_annotation", 200, 100), _launch("k", 1, 210, 2), _device_work("k", 210, 3, 2)]}
    assert ts.region_device_times(trace, ["backward"]) == {"backward": pytest.approx(10e-6)}


def test_region_device_timings_give_one_repeat_per_call_and_name_the_slowest_on_the_device():
    """W3 (review 3): on a GPU a region's host span is how long it took to queue; its kernels' time is what it costs."""
    steps = []
    for step in range(5):
        t = step * 1000
        steps += [_x("data", "user_annotation", t, 300), _launch("k", 1, t + 10, 10 * step + 1),
                  _device_work("copy", t + 10, 20, 10 * step + 1, "gpu_memcpy"),
                  _x("forward", "user_annotation", t + 300, 30), _launch("k", 1, t + 305, 10 * step + 2),
                  _device_work("sgemm", t + 310, 400 + step, 10 * step + 2)]
    timings = ts.region_device_timings({"traceEvents": steps}, ["data", "forward", "backward"])
    assert set(timings) == {"data", "forward"}  # backward never ran
    assert len(timings["forward"].times) == 5 and timings["forward"].median == pytest.approx(402e-6)
    host = ts.region_timings({"traceEvents": steps}, ["data", "forward"])
    assert "data" in bench.describe_leader(list(host.values()), "slowest region", slowest=True).split(":")[0]
    assert "forward" in bench.describe_leader(list(timings.values()), "slowest region", slowest=True).split(":")[0]


def test_region_device_times_of_a_real_cpu_profile_are_zero(tmp_path):
    from torch.profiler import ProfilerActivity, profile, record_function

    model = nn.Linear(8, 4)
    with ts.native_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("forward"):
            loss = model(torch.randn(2, 8)).sum()
        with record_function("backward"):
            loss.backward()
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    assert ts.region_device_times(tmp_path / "t.json", ["forward", "backward"]) == {"forward": 0.0, "backward": 0.0}
    with pytest.raises(ValueError, match="not a Chrome trace"):
        ts.region_device_times({"events": []})
