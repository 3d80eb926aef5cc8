"""The course's CUDA branches, run as far as a CPU allows, on a fake machine with GPUs (issue 23).

No GPU has ever run this course, and on the CPU every ``if torch.cuda.is_available():`` takes its other
branch, so a device mix-up in a CUDA branch (finding 1: FSDP2 without ``mesh=`` moves the input to CUDA
while the target stays on the CPU) would first show on a learner's GPU. On a CUDA build of torch
(CI's torch-floor venv is one) :mod:`fake_cuda` makes this process look like a machine with H100s or T4s
whose tensors are fake CUDA tensors: every operator checks devices as CUDA would, and a mix-up raises.

What runs: the helpers that choose devices and move tensors and models (device, memory, dataloader, amp,
ddp), chapter 06's FSDP2 demonstration rank by rank, and every solution notebook's code cells in order.
A cell may stop where only a real GPU can go on (a value of a fake tensor, a child process, the CUDA
profiler): that is recorded, not failed. A device mix-up fails, and the self-tests plant one to prove it.

A stream on the wrong GPU mixes nothing a kernel can see (review 2, finding 6: with ``COURSE_DEVICE=cuda:1``
a device-less ``torch.cuda.Stream()`` was GPU 0's, so the "side-stream" copy ran on GPU 1's default stream
and the events timed GPU 0's idle queue). So every chapter and every ``measure_*`` also runs on two GPUs
with ``cuda:1`` chosen, and each stream made, event recorded and synchronisation must act on ``cuda:1``;
a ``torch.cuda.Stream()`` of the course's own that names no device fails too (:func:`fake_cuda.off_device`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections import namedtuple

import pytest
import torch
from torch import nn

from support import fake_cuda as fc
from conftest import CUDA_BUILD_SKIP_REASON
from support.layout import chapters, load, solution_path

#: On a CPU-only build a fake CUDA tensor exists, but the first module that uses one aborts the process (no
#: CUDA device guard: fake_cuda.cuda_build), so nothing here can run; the skip says so.
CPU_BUILD_REASON = f"{CUDA_BUILD_SKIP_REASON}: torch {torch.__version__}; CI's torch-floor venv runs these"

pytestmark = pytest.mark.skipif(not fc.cuda_build(), reason=CPU_BUILD_REASON)

MACHINES = {"H100x1": (fc.H100, 1), "T4x1": (fc.T4, 1), "H100x2": (fc.H100, 2)}


@pytest.fixture(params=list(MACHINES))
def machine(request):
    """Each helper test runs on one H100, one T4 (Colab), and two H100s."""
    gpu, count = MACHINES[request.param]
    with fc.fake_cuda_machine(gpu, count) as m:
        yield m


def on_gpu(t: torch.Tensor, index: int = 0) -> bool:
    return t.device == torch.device("cuda", index)


# --------------------------------------------------------------------------- the fake machine itself


@pytest.mark.parametrize("gpu, l2, memory, native_bf16", [(fc.H100, 50, 80, True), (fc.T4, 4, 15, False)])
def test_the_fake_machine_answers_like_its_gpu(gpu, l2, memory, native_bf16):
    with fc.fake_cuda_machine(gpu, 1):
        props = torch.cuda.get_device_properties(0)
        assert (props.major, props.minor) == torch.cuda.get_device_capability() == (gpu.major, gpu.minor)
        assert props.L2_cache_size == l2 * 2**20 and props.total_memory == memory * 2**30
        assert torch.cuda.mem_get_info() == (memory * 2**30, memory * 2**30)
        assert torch.cuda.get_device_name() == gpu.name
        assert torch.cuda.is_bf16_supported(including_emulation=False) is native_bf16
        assert torch.cuda.is_bf16_supported()  # emulated on a T4: torch's default says yes
        assert on_gpu(torch.ones(2, device="cuda")) and on_gpu(torch.ones(2).to("cuda")) and on_gpu(torch.ones(2).cuda())
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(), end.record(), torch.cuda.synchronize()
        assert start.elapsed_time(end) >= 0
    assert not isinstance(torch.ones(1), torch._subclasses.fake_tensor.FakeTensor)  # all put back


def test_the_fake_machine_refuses_what_it_lacks_as_cuda_does():
    with fc.fake_cuda_machine(fc.H100, 1):
        for ask in (lambda: torch.ones(1, device="cuda:1"), lambda: torch.ones(1).to("cuda:1"),
                    lambda: torch.cuda.set_device(1)):
            with pytest.raises(RuntimeError, match="invalid device ordinal") as err:
                ask()
            assert fc.is_mismatch(err.value)
        with pytest.raises(RuntimeError) as err:
            nn.Linear(3, 1).to("cuda")(torch.ones(2, 3))
        assert fc.is_mismatch(err.value)


def test_the_fake_machine_records_the_gpu_each_stream_call_acts_on():
    with fc.fake_cuda_machine(fc.H100, 2) as m:
        torch.cuda.set_device(1)
        side, named = torch.cuda.Stream(), torch.cuda.Stream(torch.device("cuda", 0))
        with torch.cuda.stream(side):
            pass
        event = torch.cuda.Event(enable_timing=True)
        event.record(), event.record(torch.cuda.current_stream(0))
        torch.cuda.synchronize(), torch.cuda.synchronize("cuda:0")
    got = [(c.call, c.index, c.explicit) for c in m.device_calls]
    assert got == [("torch.cuda.Stream()", 1, False), ("torch.cuda.Stream(device)", 0, True),
                   ("torch.cuda.stream(s)", 1, True), ("Event.record()", 1, False),
                   ("torch.cuda.current_stream(device)", 0, True), ("Event.record(stream)", 0, True),
                   ("torch.cuda.synchronize()", 1, False), ("torch.cuda.synchronize(device)", 0, True)], got
    assert all(c.site.startswith("tests/unit/helpers/test_cuda_branches.py:") and not c.by_torch for c in m.device_calls)
    whys = [why for _, why in fc.off_device(m.device_calls, "cuda:1")]
    assert sum("names no device" in why for why in whys) == 1  # the device-less Stream(), though on cuda:1
    assert sum("acts on cuda:0, not on the chosen cuda:1" in why for why in whys) == 4


def test_a_rank_run_alone_keeps_its_gpu_to_itself():
    """A rank is a process of its own: its set_device is not its launcher's, and its streams go to its LOCAL_RANK's GPU."""
    with fc.fake_cuda_machine(fc.H100, 2) as m:
        torch.cuda.set_device(1)
        with fc.alone_in_a_group(0, 2):
            torch.cuda.set_device(0)
            torch.cuda.Stream(torch.device("cuda", 0))
        assert torch.cuda.current_device() == 1
    assert [(c.index, c.rank) for c in m.device_calls] == [(0, 0)] and not fc.off_device(m.device_calls, "cuda:1")


def test_a_module_built_on_the_fake_machine_moves_and_trains_there(machine):
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 1)).to("cuda")
    assert all(on_gpu(t) for t in [*model.parameters(), *model.buffers()])
    optimizer = torch.optim.AdamW(model.parameters())
    loss = nn.functional.mse_loss(model(torch.randn(5, 4, device="cuda")), torch.zeros(5, 1, device="cuda"))
    loss.backward()
    optimizer.step()
    assert all(on_gpu(p.grad) for p in model.parameters()) and on_gpu(optimizer.state[model[0].weight]["exp_avg"])


# --------------------------------------------------------------------------- the helpers' CUDA branches


Pair = namedtuple("Pair", "inputs target")


@dataclasses.dataclass
class Sample:
    image: torch.Tensor
    name: str


def test_device_helpers_put_everything_on_the_gpu(machine):
    from helpers import device as dev
    from helpers.models import SimpleModel

    device = dev.pick_device()
    assert device == torch.device("cuda", 0) == dev.accelerator()
    assert dev.available_devices() == [torch.device("cuda", i) for i in range(machine.count)] + [torch.device("cpu")]
    assert dev.pick_device(f"cuda:{machine.count - 1}") == torch.device("cuda", machine.count - 1)
    with pytest.raises(dev.DeviceUnavailableError, match=f"has {machine.count} CUDA GPU"):
        dev.pick_device(f"cuda:{machine.count}")
    batch = {"x": torch.randn(2, 10), "more": [Pair(torch.ones(2), torch.zeros(2, dtype=torch.long))],
             "sample": Sample(torch.ones(1, 2), "a"), "label": "kept"}
    moved = dev.to_device(batch, device)
    leaves = [moved["x"], moved["more"][0].inputs, moved["more"][0].target, moved["sample"].image]
    assert all(on_gpu(t) for t in leaves), [t.device for t in leaves]
    pinned = dev.to_device(torch.ones(3).pin_memory(), device)  # non_blocking chosen for a pinned source
    assert on_gpu(pinned)
    model = SimpleModel().to(device)
    assert on_gpu(model(moved["x"]))
    dev.synchronize(device)
    dev.synchronize()


def test_memory_helpers_measure_the_gpu(machine):
    from helpers import memory

    last = machine.count - 1
    with memory.track_memory(f"cuda:{last}") as mem:
        kept = torch.empty(1024, device=f"cuda:{last}")
        torch.empty(2048, device=f"cuda:{last}")  # freed at once: counts in the peak only
        torch.empty(10**6, device="cpu")  # not the GPU's
    assert mem.device == torch.device("cuda", last) and mem.method == "cuda"
    assert (mem.peak_bytes, mem.current_bytes) == (4096 + 8192, 4096), mem
    del kept
    step = memory.allocation_step(4096, fixed_bytes=1024)  # the device it allocates on: the GPU
    with memory.MemoryBudget(64 * 1024, "cuda") as budget:
        step(2)
        with pytest.raises(torch.OutOfMemoryError):
            step(10**6)
    assert budget.device == torch.device("cuda", 0)
    memory.free_memory()


def test_dataloader_helpers_feed_the_gpu(machine):
    from helpers import dataloader as dl

    loader = dl.make_loader(dl.SleepDataset(n=8, item_s=0.0), "cuda", batch_size=4)
    assert loader.pin_memory
    first = next(iter(loader))
    assert first["x"].is_pinned() and first["y"].is_pinned(), "pin_memory=True gave unpinned batches"
    prefetcher = dl.DevicePrefetcher(loader, "cuda")
    assert prefetcher.overlaps
    for batch in prefetcher:
        assert on_gpu(batch["x"]) and on_gpu(batch["y"]), {k: getattr(v, "device", v) for k, v in batch.items()}
    linear = nn.Linear(first["x"].shape[1], 1).to("cuda")
    times = dl.time_steps(loader, lambda b: linear(b["x"]) - b["y"], "cuda")
    assert times.load and times.compute


@pytest.mark.parametrize("gpu, dtype, scaled", [(fc.H100, torch.bfloat16, False), (fc.T4, torch.float16, True)])
def test_amp_chooses_per_gpu_and_runs_its_step_there(gpu, dtype, scaled):
    from helpers import amp

    with fc.fake_cuda_machine(gpu, 1):
        plan = amp.amp_plan("cuda")
        assert (plan.device_type, plan.dtype, plan.use_scaler) == ("cuda", dtype, scaled), plan
        model = nn.Linear(8, 2).to("cuda")
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch.randn(4, 8, device="cuda"), torch.randn(4, 2, device="cuda")
        loss_fn = nn.functional.mse_loss
        if plan.use_scaler:
            amp.scaled_step(model, x, y, loss_fn, optimizer, torch.amp.GradScaler("cuda"), "cuda", plan.dtype)
        else:
            amp.autocast_step(model, x, y, loss_fn, optimizer, "cuda", plan.dtype)
        rows = {r["op"]: r for r in amp.autocast_policy("cuda", plan.dtype)}
        assert rows, "autocast_policy recorded nothing on CUDA"


@pytest.mark.parametrize("gpus, world, expected", [
    (1, 1, [("nccl", "cuda:0")]),
    (1, 2, [("gloo", "cpu"), ("gloo", "cpu")]),  # two ranks cannot share one GPU under NCCL (finding 2's case)
    (2, 2, [("nccl", "cuda:0"), ("nccl", "cuda:1")]),
])
def test_ddp_picks_the_backend_and_gpu_of_each_rank(gpus, world, expected):
    from helpers import ddp

    with fc.fake_cuda_machine(fc.H100, gpus):
        got = []
        for rank in range(world):
            with fc.alone_in_a_group(rank, world):
                backend, dev = ddp.pick_backend(rank, world)
                assert ddp._setup(rank, world) == dev  # set_device and init_process_group(device_id=) accept it
                got.append((backend, str(dev)))
    assert got == expected


@pytest.mark.parametrize("gpus", [1, 2])
def test_ddp_training_loop_runs_each_rank_on_its_gpu(gpus):
    from helpers import ddp
    from helpers.models import make_regression

    x, y = make_regression(16, 4, seed=0)
    with fc.fake_cuda_machine(fc.H100, gpus):
        run = fc.launch_each_rank_alone(ddp.train, gpus, args=(x, y))
    assert [r["steps"] for r in run.results] == [2 * (16 // gpus // 4)] * gpus  # 2 epochs of this rank's batches of 4


def _measure_kwargs(chapter: str) -> dict:
    from course_tools.gpu_check import measure

    extra = {"04_dataloader": {"nbytes": 2**20}, "08_speed": {"trace": False, "compiled": False},  # 08: CUPTI, Dynamo
             "09_fast_step": {"compiled": False, "workers": 0},  # Dynamo cannot trace fake tensors; no children
             "10_kernels": {"compiled": False}}
    return {**measure.REHEARSAL.get(chapter, {}), **extra.get(chapter, {})}


def _gpu_check_chapters() -> list[str]:
    from course_tools.gpu_check import measure

    return list(measure.MEASURES)


def _measure_report(chapter: str, device: str, gpus: int, out: str) -> None:
    """In the fresh child :func:`_measure_apart` starts: ``chapter``'s ``measure_*`` on a fake machine of ``gpus``
    H100s, and what it reported, pickled into ``out``."""
    import pickle

    from course_tools.gpu_check import measure

    report: dict = {"error": None, "calls": []}
    try:
        with fc.fake_cuda_machine(fc.H100, gpus) as m, fc.stand_ins():
            try:
                report["figures"], report["skipped"] = measure.MEASURES[chapter](torch.device(device),
                                                                                 **_measure_kwargs(chapter))
            except Exception as err:  # noqa: BLE001 - described for the parent, which decides
                report["error"] = {"text": f"{type(err).__name__}: {err}", "mismatch": fc.is_mismatch(err),
                                   "child_refused": isinstance(err, fc.ChildProcessRefused),
                                   "stop": fc.stop_reason(err)}
            report["calls"] = list(m.device_calls)
    except BaseException as err:  # noqa: BLE001 - the machine itself failed: say so
        report = {"error": {"text": f"the fake machine failed: {err!r}", "mismatch": False,
                            "child_refused": False, "stop": repr(err)}, "calls": []}
    with open(out, "wb") as fh:
        pickle.dump(report, fh)


def _measure_apart(chapter: str, device: torch.device, gpus: int) -> dict:
    """Run ``chapter``'s ``measure_*`` on a fake machine of ``gpus`` H100s in a fresh Python; what it reported, as data.

    Why a process of its own: FakeTensorMode on a CUDA build without a GPU (torch 2.11 here) has corrupted the C
    heap during a long measurement (measure_08's: glibc's malloc then crashed in a later, unrelated test, in
    "unlink_chunk"), which no course code can cause on a real machine. Why a fresh one, not a fork: a fork inherits
    the heap of a test process that already ran other fake-CUDA tests, and such a child died with SIGSEGV before
    reporting (measure_03, measure_09, once the tests were scheduled differently over the workers). The verdict
    still covers every call the measurement made. A child that dies before it reports fails the test.
    """
    import pickle
    import subprocess
    import sys
    import tempfile

    here = os.path.dirname(os.path.abspath(__file__))
    tests = os.path.dirname(os.path.dirname(here))
    code = (f"import sys; sys.path[:0] = {[here, tests]!r}\n"
            "from test_cuda_branches import _measure_report\n"
            f"_measure_report({chapter!r}, {str(device)!r}, {gpus}, sys.argv[1])\n")
    with tempfile.TemporaryDirectory(prefix="measure-") as work:
        out = os.path.join(work, "report.pkl")
        proc = subprocess.run([sys.executable, "-c", code, out], capture_output=True, text=True, timeout=600,
                              env=dict(os.environ, MPLBACKEND="Agg"))
        assert os.path.exists(out), (f"measure_{chapter[:2]} on the fake machine died before reporting (exit "
                                     f"{proc.returncode}): {proc.stderr[-2000:]}")
        with open(out, "rb") as fh:
            return pickle.load(fh)


@pytest.mark.parametrize("chapter", _gpu_check_chapters())
def test_gpu_check_measures_run_their_cuda_branches(chapter):
    """``make gpu-check``'s measurements (course_tools/gpu_check/measure.py) at their rehearsal sizes, on CUDA:
    whatever a first real GPU run would trip over in placement shows here first."""
    report = _measure_apart(chapter, torch.device("cuda", 0), gpus=1)
    if report["error"]:
        err = report["error"]
        assert not err["mismatch"], f"{chapter}'s GPU measurement mixes devices: {err['text']}"
        assert chapter == "07_troubleshooting" and err["child_refused"], err["stop"]
        return  # its device-side assert runs in a child process: real CUDA only
    figures, skipped = report["figures"], report["skipped"]
    assert figures and not any("ran on" in why for why in skipped.values()), (figures, skipped)
    if chapter == "08_speed":  # every CUDA figure but the traced and the compiled ones
        assert {"streams_side_stream", "cudnn_benchmark_on", "adamw_fused"} <= set(figures), (figures, skipped)
    if chapter == "09_fast_step":  # every rung but the compiled one
        assert {"step_fed_loader", "step_autocast", "step_sdpa", "peak_16bit"} <= set(figures), (figures, skipped)
    if chapter == "03_memory":
        assert figures["allocated_after_alloc"] == 64 * 2**20 and "CUDA out of memory" in figures["oom_message"]


#: What the check of streams on the chosen GPU finds today in code another change is fixing: xfail (not strict).
KNOWN_OFF_DEVICE: dict[str, str] = {}  # chapter -> why its streams or events may still be off the chosen GPU


def _known_off_device(chapter: str) -> list:
    reason = KNOWN_OFF_DEVICE.get(chapter)
    return [pytest.mark.xfail(strict=False, reason=reason)] if reason else []


def assert_on_chosen_device(where: str, calls: list[fc.DeviceCall], chosen: torch.device, cell: str = "") -> list[str]:
    """The lines of a failure's message, one per stream, event or synchronisation off ``chosen`` (see fake_cuda.off_device)."""
    return [f"  {where}{cell}: {why}; at {c.where()}" for c, why in fc.off_device(calls, chosen)]


@pytest.mark.parametrize("chapter", [pytest.param(c, marks=_known_off_device(c)) for c in _gpu_check_chapters()])
def test_gpu_check_measures_keep_their_streams_on_the_gpu_they_measure(chapter):
    """``gpu-check`` on ``cuda:1`` of two GPUs (the current GPU still 0): every stream, event and synchronisation of a
    measurement acts on ``cuda:1``, or a "side stream" would be GPU 0's and the events would time GPU 0's idle queue."""
    chosen = torch.device("cuda", 1)
    report = _measure_apart(chapter, chosen, gpus=2)
    if report["error"]:
        err = report["error"]
        assert not err["mismatch"], f"{chapter}'s GPU measurement on {chosen} mixes devices: {err['text']}"
        assert chapter == "07_troubleshooting" and err["child_refused"], err["stop"]
    lines = assert_on_chosen_device(f"measure_{chapter[:2]}", report["calls"], chosen)
    assert not lines, f"{chapter}: streams, events or synchronisations off {chosen}:\n" + "\n".join(lines)


# --------------------------------------------------------------------------- chapter 06's FSDP2 demo (finding 1)


def _chapter_function(chapter: str, name: str) -> tuple[str, str]:
    """The source of the cell that defines ``name`` in ``chapter``, and of the chapter's import cell."""
    nb = load(solution_path(chapter))
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    imports = next(s for s in code if re.search(r"^from helpers", s, re.M) and "pick_device" in s)
    return next(s for s in code if re.search(rf"^def {name}\(", s, re.M)), imports


def _run_fsdp_demo(source: str, imports: str, gpus: int) -> list:
    namespace: dict = {}
    with fc.fake_cuda_machine(fc.H100, gpus):
        exec(compile(imports, "<imports>", "exec"), namespace)
        exec(compile(source, "<show_fsdp>", "exec"), namespace)
        return fc.launch_each_rank_alone(namespace["show_fsdp"], 2).results


@pytest.mark.parametrize("gpus", [1, 2])
def test_chapter_06_fsdp_demo_keeps_every_rank_on_its_devices(gpus):
    source, imports = _chapter_function("06_multi_gpu", "show_fsdp")
    results = _run_fsdp_demo(source, imports, gpus)
    assert len(results) == 2


@pytest.mark.parametrize("gpus", [1, 2])
def test_self_test_the_fsdp_demo_without_a_cpu_mesh_fails(gpus):
    """Finding 1 planted back: without ``mesh=``, fully_shard builds its mesh on CUDA and the gloo demo mixes devices."""
    source, imports = _chapter_function("06_multi_gpu", "show_fsdp")
    planted = re.sub(r",\s*mesh=mesh", "", source)
    assert planted != source, "chapter 06's show_fsdp no longer passes mesh=mesh: update this self-test"
    with pytest.raises(Exception) as err:
        _run_fsdp_demo(planted, imports, gpus)
    assert fc.is_mismatch(err.value), f"expected a device mix-up, got {fc.stop_reason(err.value)}"


# --------------------------------------------------------------------------- the exercises' reference solutions

#: For each exercise whose reference solution takes a device: code that calls it on the fake GPU and checks
#: where its results are. The grade cells test the same functions on the CPU and the meta device only.
SOLUTION_DRIVERS = {
    ("01_why_gpus", "time_on_device"): """
a = torch.randn(16, 16, device="cuda")
assert time_on_device(lambda: a @ a, "cuda", warmup=1, repeats=2) >= 0
""",
    ("02_devices", "choose_device"): """
assert choose_device() == torch.device("cuda", 0) and choose_device("cuda") == torch.device("cuda")
""",
    ("02_devices", "move_batch"): """
moved = move_batch({"x": torch.ones(2), "pair": [torch.zeros(1), (torch.arange(3), "id")]}, device)  # the chapter's pick_device()
assert all(t.device == torch.device("cuda", 0) for t in (moved["x"], moved["pair"][0], moved["pair"][1][0]))
""",
    ("02_devices", "forward_on"): """
assert forward_on(nn.Linear(10, 1), torch.randn(3, 10), torch.device("cuda", 0)).device == torch.device("cuda", 0)
""",
    ("04_dataloader", "loader_for"): """
from helpers import dataloader as dl
loader = loader_for(dl.SleepDataset(n=8, item_s=0.0), "cuda", 4, 0, 0)
batch = next(iter(loader))
assert loader.pin_memory and batch["x"].is_pinned()
""",
    ("05_mixed_precision", "amp_train_step"): """
import torch.nn.functional as F
from helpers.amp import amp_plan
plan = amp_plan("cuda")
model = nn.Linear(8, 1).to("cuda")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cuda", enabled=plan.use_scaler)
x, y = torch.randn(4, 8, device="cuda"), torch.randn(4, 1, device="cuda")
assert isinstance(amp_train_step(model, x, y, F.mse_loss, optimizer, scaler, "cuda", plan.dtype), float)
""",
    ("05_mixed_precision", "amp_clip_step"): """
import torch.nn.functional as F
from helpers.amp import amp_plan
plan = amp_plan("cuda")
model = nn.Linear(8, 1).to("cuda")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cuda", enabled=plan.use_scaler)
x, y = torch.randn(4, 8, device="cuda"), torch.randn(4, 1, device="cuda")
assert isinstance(amp_clip_step(model, x, y, F.mse_loss, optimizer, scaler, "cuda", plan.dtype, 1.0), float)
""",
    ("07_troubleshooting", "train_epoch"): """
model = nn.Linear(6, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
batches = [(torch.randn(4, 6), torch.randint(1, 4, (4,))) for _ in range(2)]  # on the CPU, labels 1..3
assert isinstance(train_epoch(model, optimizer, batches, torch.device("cuda", 0)), float)
assert next(model.parameters()).device == torch.device("cuda", 0)
assert isinstance(evaluate(model, batches, torch.device("cuda", 0)), float)
""",
}


def _drive(chapter: str, name: str, source: str, gpu: fc.GPU) -> None:
    _, imports = _chapter_function(chapter, name)
    namespace: dict = {}
    with fc.fake_cuda_machine(gpu, 1):
        for code, where in ((imports, "<imports>"), (source, f"<{name}>"), (SOLUTION_DRIVERS[chapter, name], "<driver>")):
            exec(compile(code, where, "exec"), namespace)


@pytest.mark.parametrize("gpu", [fc.H100, fc.T4], ids=["H100", "T4"])
@pytest.mark.parametrize("chapter, name", list(SOLUTION_DRIVERS), ids=[f"{c}/{n}" for c, n in SOLUTION_DRIVERS])
def test_reference_solution_runs_on_the_gpu(chapter, name, gpu):
    _drive(chapter, name, _chapter_function(chapter, name)[0], gpu)


def test_self_test_a_solution_that_leaves_the_labels_on_the_cpu_fails():
    """The classic slip planted in chapter 07's train_epoch: the inputs go to the GPU, the labels stay behind."""
    source, _ = _chapter_function("07_troubleshooting", "train_epoch")
    planted = source.replace("(y - 1).to(device)", "(y - 1)")
    assert planted != source, "chapter 07's train_epoch no longer moves (y - 1): update this self-test"
    with pytest.raises(Exception) as err:
        _drive("07_troubleshooting", "train_epoch", planted, fc.H100)
    assert fc.is_mismatch(err.value), f"expected a device mix-up, got {fc.stop_reason(err.value)}"


# --------------------------------------------------------------------------- chapter 06's exercise (finding 11)


class InMemoryCheckpoints:
    """``torch.save``/``torch.load`` of a path, kept in memory: a fake tensor has no bytes to write to a file.

    ``torch.load(..., map_location=device)`` moves every tensor to ``device``, as the real one does.
    """

    def __init__(self) -> None:
        self.saved: dict[str, object] = {}
        self.devices: list[torch.device] = []

    def save(self, obj, path, *args, **kwargs) -> None:
        self.saved[str(path)] = obj

    def load(self, path, map_location=None, **kwargs):
        from helpers.device import to_device

        obj = self.saved[str(path)]
        if map_location is None:
            return obj
        self.devices.append(torch.device(map_location))
        return to_device(obj, map_location)


def _run_train_ddp(source: str, gpus: int, world: int, per_machine: int, tmp_path) -> InMemoryCheckpoints:
    from unittest import mock

    from helpers.models import make_regression

    _, imports = _chapter_function("06_multi_gpu", "train_ddp")
    namespace: dict = {}
    checkpoints = InMemoryCheckpoints()
    x, y = make_regression(16, 3, seed=0)
    with fc.fake_cuda_machine(fc.H100, gpus), mock.patch.object(torch, "save", checkpoints.save), \
            mock.patch.object(torch, "load", checkpoints.load):
        exec(compile(imports, "<imports>", "exec"), namespace)
        exec(compile(source, "<train_ddp>", "exec"), namespace)
        fc.launch_each_rank_alone(namespace["train_ddp"], world, args=(x, y, str(tmp_path / "ddp.pt")),
                                  local_world_size=per_machine)
    return checkpoints


@pytest.mark.parametrize("gpus, world, per_machine", [(1, 1, 1), (2, 2, 2), (2, 4, 2)])
def test_chapter_06_train_ddp_puts_each_rank_on_its_local_gpu(gpus, world, per_machine, tmp_path):
    """The exercise's reference solution, rank by rank: one GPU; two; two machines of two GPUs (ranks 2, 3 on GPUs 0, 1)."""
    source, _ = _chapter_function("06_multi_gpu", "train_ddp")
    checkpoints = _run_train_ddp(source, gpus, world, per_machine, tmp_path)
    assert checkpoints.devices == [torch.device("cuda", r % per_machine) for r in range(world)]


def test_self_test_train_ddp_with_cuda_rank_fails_on_the_second_machine(tmp_path):
    """Finding 11 planted back: ``cuda:rank`` asks rank 2 of two 2-GPU machines for a third GPU."""
    source, _ = _chapter_function("06_multi_gpu", "train_ddp")
    planted = source.replace('int(os.environ.get("LOCAL_RANK", rank))', "rank")
    assert planted != source, "chapter 06's train_ddp no longer reads LOCAL_RANK so: update this self-test"
    with pytest.raises(Exception) as err:
        _run_train_ddp(planted, 2, 4, 2, tmp_path)
    assert fc.is_mismatch(err.value), f"expected invalid device ordinal, got {fc.stop_reason(err.value)}"


# --------------------------------------------------------------------------- every chapter, cell by cell


def describe(runs: list[fc.CellRun]) -> str:
    """One line per cell that did not run, for a failure's message (and ``pytest -rA``'s report)."""
    return "\n".join(f"  cell {r.index}: {r.status}: {r.reason}" for r in runs if r.status != "ran")


def assert_no_mismatch(chapter: str, runs: list[fc.CellRun]) -> None:
    """Fail naming each cell where a device mix-up happened, and the line of the cell it happened on."""
    bad = [r for r in runs if r.status == "mismatch"]
    lines = []
    for r in bad:
        frames = [f for f in _frames(r.error) if f[0].startswith("<cell ")]  # the innermost notebook line
        where = f" (at {frames[-1][0][1:-1]}, line {frames[-1][1]})" if frames else ""
        lines.append(f"  cell {r.index}{where}: {r.reason}")
    assert not bad, f"{chapter}: device mix-up on the fake GPU machine:\n" + "\n".join(lines) + \
        f"\nevery cell that did not run:\n{describe(runs)}"


def _frames(err: BaseException) -> list[tuple[str, int]]:
    import traceback

    return [(f.filename, f.lineno) for f in traceback.extract_tb(err.__traceback__)] if err else []


#: Where a chapter's own code mixes devices today (issue 23 findings still open): xfail(strict) until fixed.
KNOWN_MISMATCHES: dict[tuple[str, str], str] = {}

#: Every chapter on one H100; the chapters whose CUDA branches depend on the kind of GPU (demo sizes from its
#: L2, the T4's fp16 path: findings 4 and 7) on a T4 too; the multi-GPU chapter on two GPUs.
CHAPTER_RUNS = [(chapter, "H100x1") for chapter in chapters()] + [
    (chapter, "T4x1") for chapter in ("01_why_gpus", "05_mixed_precision", "07_troubleshooting")] + [
    ("06_multi_gpu", "H100x2")]


def _marks(chapter: str, machine: str) -> list:
    reason = KNOWN_MISMATCHES.get((chapter, machine))
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


@pytest.mark.parametrize("chapter, machine_name",
                         [pytest.param(c, m, id=f"{c}-{m}", marks=_marks(c, m)) for c, m in CHAPTER_RUNS])
def test_chapter_runs_its_cuda_branches_without_mixing_devices(chapter, machine_name):
    gpu, count = MACHINES[machine_name]
    path = solution_path(chapter)
    runs, namespace = fc.run_cells(load(path).cells, gpu, count, workdir=path.parent)
    assert_no_mismatch(chapter, runs)
    assert namespace.get("device") == torch.device("cuda", 0), \
        f"{chapter} chose {namespace.get('device')!r} on a machine with a GPU:\n{describe(runs)}"
    ran = [r for r in runs if r.status == "ran"]
    assert len(ran) >= 5, f"{chapter}: only {len(ran)} cells ran on the fake machine; the others:\n{describe(runs)}"
    print(f"{chapter} on {machine_name}: {len(ran)} of {len(runs)} code cells ran\n{describe(runs)}")


PLANTED = [
    "from helpers.device import pick_device\nimport torch\nfrom torch import nn\ndevice = pick_device()",
    "model = nn.Linear(4, 1).to(device)\nx, y = torch.randn(8, 4), torch.randn(8, 1)",
    "loss = nn.functional.mse_loss(model(x.to(device)), y)  # the target stays on the CPU",
    "print('a cell after the mix-up still runs')",
]


def test_self_test_a_planted_mismatch_in_a_chapter_fails_the_check():
    cells = [{"cell_type": "code", "source": s, "metadata": {}} for s in PLANTED]
    runs, _ = fc.run_cells(cells)
    assert [r.status for r in runs] == ["ran", "ran", "mismatch", "ran"], describe(runs)
    with pytest.raises(AssertionError, match=r"cell 2 \(at cell 2, line 1\): .*found two different devices"):
        assert_no_mismatch("planted", runs)


def test_self_test_a_cell_that_needs_a_real_gpu_is_a_stop_not_a_failure():
    cells = [{"cell_type": "code", "source": s, "metadata": {}} for s in [
        "import torch\nx = torch.ones(3, device='cuda')",
        "values = x.tolist() if False else x.cpu().numpy()",
        "import subprocess\nsubprocess.run(['true'])",
    ]]
    runs, _ = fc.run_cells(cells)
    assert [r.status for r in runs] == ["ran", "stopped", "stopped"], describe(runs)
    assert_no_mismatch("stops", runs)


# --------------------------------------------------------------------------- every chapter on cuda:1 (finding 6)


def assert_streams_on(chapter: str, runs: list[fc.CellRun], chosen: torch.device) -> None:
    """Fail naming the chapter, each cell and each call whose stream, event or synchronisation is off ``chosen``."""
    lines = [line for r in runs for line in
             assert_on_chosen_device(chapter, r.device_calls, chosen, f", cell {r.index} ({r.cell_id or 'no id'})")]
    assert not lines, f"{chapter}: streams, events or synchronisations off the chosen {chosen}:\n" + "\n".join(lines)


@pytest.mark.parametrize("chapter", [pytest.param(c, marks=_known_off_device(c)) for c in chapters()])
def test_chapter_keeps_its_streams_on_the_chosen_gpu(chapter, monkeypatch):
    """README's ``COURSE_DEVICE=cuda:1`` on two GPUs: the chapter's device is cuda:1, and so is every stream it makes,
    every event it records and every synchronisation (its own cells' and its helpers')."""
    monkeypatch.setenv("COURSE_DEVICE", "cuda:1")
    path = solution_path(chapter)
    runs, namespace = fc.run_cells(load(path).cells, fc.H100, 2, workdir=path.parent)
    assert_no_mismatch(chapter, runs)
    assert namespace.get("device") == torch.device("cuda", 1), \
        f"{chapter} chose {namespace.get('device')!r} with COURSE_DEVICE=cuda:1:\n{describe(runs)}"
    assert_streams_on(chapter, runs, torch.device("cuda", 1))


def _cells(chapter: str, *ids: str) -> list[dict]:
    """Copies of the code cells of ``chapter`` with these ids, in this order."""
    by_id = {c.get("id"): c for c in load(solution_path(chapter)).cells}
    return [{"cell_type": "code", "source": by_id[i].source, "metadata": {}, "id": i} for i in ids]


def _imports(chapter: str) -> str:
    return next(c.get("id") for c in load(solution_path(chapter)).cells
                if c.cell_type == "code" and re.search(r"^from helpers", c.source, re.M) and "pick_device" in c.source)


def test_self_test_a_planted_device_less_stream_fails_the_check(monkeypatch):
    """Chapter 04's side-stream cell with ``torch.cuda.Stream()`` planted back: right at run time (pick_device made
    cuda:1 current), but a copy of the cell in a script without pick_device would use GPU 0's stream."""
    monkeypatch.setenv("COURSE_DEVICE", "cuda:1")
    cells = _cells("04_dataloader", _imports("04_dataloader"), "c03", "c25")
    planted = cells[-1]["source"].replace("torch.cuda.Stream(device)", "torch.cuda.Stream()")
    assert planted != cells[-1]["source"], "chapter 04's c25 no longer makes torch.cuda.Stream(device): update this test"
    cells[-1]["source"] = planted
    runs, _ = fc.run_cells(cells, fc.H100, 2)
    assert [r.status for r in runs] == ["ran"] * 3, describe(runs)
    assert_streams_on("04_dataloader", runs[:2], torch.device("cuda", 1))
    with pytest.raises(AssertionError, match=r"04_dataloader, cell 2 \(c25\): torch\.cuda\.Stream\(\) names no device.*"
                                             r"at cell 2, line \d+: `side = torch\.cuda\.Stream\(\) "):
        assert_streams_on("04_dataloader", runs, torch.device("cuda", 1))


def test_self_test_without_set_device_device_less_calls_land_on_gpu_0(monkeypatch):
    """Finding 6 planted back: pick_device without set_device, so a device-less synchronize and event act on GPU 0."""
    from helpers import device as dev

    monkeypatch.setenv("COURSE_DEVICE", "cuda:1")
    monkeypatch.setattr(dev, "_make_current", lambda device: device)
    cells = [{"cell_type": "code", "source": s, "metadata": {}} for s in [
        "import torch\nfrom helpers.device import pick_device\ndevice = pick_device()",
        "x = torch.ones(4, device=device)\nstart = torch.cuda.Event(enable_timing=True)\nstart.record()\n"
        "torch.cuda.synchronize()",
    ]]
    runs, namespace = fc.run_cells(cells, fc.H100, 2)
    assert namespace["device"] == torch.device("cuda", 1) and [r.status for r in runs] == ["ran", "ran"], describe(runs)
    with pytest.raises(AssertionError, match=r"(?s)cell 1 \(no id\): Event\.record\(\) acts on cuda:0, not on the chosen "
                                             r"cuda:1; at cell 1, line 3.*torch\.cuda\.synchronize\(\) acts on cuda:0"):
        assert_streams_on("planted", runs, torch.device("cuda", 1))
