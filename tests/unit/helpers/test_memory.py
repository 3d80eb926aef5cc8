"""helpers.memory: peak and current memory, the budget's out-of-memory errors, anatomy, timeline.

What chapter 03 teaches with; the verdicts of its exercises are tested in tests/unit/checks/test_checks_ch03.py.
"""

import gc

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from helpers import memory as mem

MiB = 2**20


@pytest.mark.parametrize("method", ["profiler", "tensors"])
def test_track_memory_on_cpu_sees_tensors_peak_and_what_is_left(method):
    with mem.track_memory("cpu", method=method) as m:
        a = torch.empty(MiB, dtype=torch.uint8)
        b = torch.empty(2 * MiB, dtype=torch.uint8)
        del b
    assert m.peak_bytes == 3 * MiB
    assert m.current_bytes == MiB
    assert m.reserved_bytes is None
    del a


def test_measure_peak_counts_temporaries_above_the_start():
    keep = torch.empty(4 * MiB, dtype=torch.uint8)  # allocated before: not counted
    peak = mem.measure_peak(lambda: torch.ones(256, 1024) @ torch.ones(1024, 256), "cpu")
    assert peak == (256 * 1024 * 2 + 256 * 256) * 4
    del keep


def test_budget_raises_the_real_out_of_memory_type_and_frees_what_it_refused():
    budget = mem.MemoryBudget(MiB, "cpu")
    with budget:
        small = torch.empty(MiB // 2, dtype=torch.uint8)
    with pytest.raises(torch.OutOfMemoryError, match="budget"):
        with budget:
            torch.empty(MiB, dtype=torch.uint8)
    assert issubclass(torch.OutOfMemoryError, RuntimeError) and budget.oom_count == 1
    assert budget.live_bytes == MiB // 2  # the refused tensor was never kept
    del small
    assert budget.live_bytes == 0 and budget.peak_bytes == MiB // 2


def test_budget_checks_outputs_of_ordinary_operations_and_counts_views_once():
    budget = mem.MemoryBudget(3 * 4 * 1000, "cpu")
    x = torch.ones(1000)  # outside the budget: not counted
    with budget:
        y = x * 2
        v = y[:10]  # a view: no new memory
        z = y + 1
    assert budget.live_bytes == 2 * 4000
    with pytest.raises(torch.OutOfMemoryError):
        with budget:
            torch.cat([y, z])  # 8000 more bytes than allowed
    assert budget.live_bytes == 8000
    del y, z
    assert budget.live_bytes == 4000  # the view keeps y's storage alive
    del v
    assert budget.live_bytes == 0


def test_budget_sees_activations_saved_for_backward_until_backward_frees_them():
    model = nn.Sequential(nn.Linear(64, 256), nn.Tanh(), nn.Linear(256, 1))
    budget = mem.MemoryBudget(64 * MiB, "cpu")
    x = torch.randn(512, 64)
    with budget:
        loss = model(x).square().mean()
    saved = budget.live_bytes
    assert saved >= 512 * 256 * 4  # the tanh output is kept for backward
    with budget:
        loss.backward()
    del loss
    grads = sum(p.grad.numel() * 4 for p in model.parameters())
    assert budget.live_bytes == grads


def test_an_exception_kept_alive_keeps_the_failed_tensors_held():
    budget = mem.MemoryBudget(10_000, "cpu")
    step = mem.allocation_step(1000, fixed_bytes=4000, device="cpu")
    kept = None
    try:
        with budget:
            step(20)
    except torch.OutOfMemoryError as err:
        kept = err
    assert budget.live_bytes == 4000  # the failed frame still holds its first tensor
    kept = None
    gc.collect()
    assert budget.live_bytes == 0


def test_allocation_step_fits_exactly_the_advertised_batch():
    budget = mem.MemoryBudget(37 * 4096 + 100 + 50, "cpu")
    step = mem.allocation_step(4096, fixed_bytes=100, device="cpu")
    with budget:
        step(37)
    with pytest.raises(torch.OutOfMemoryError):
        with budget:
            step(38)
    assert budget.live_bytes == 0


def test_anatomy_estimate_matches_the_tensors_of_a_real_adam_step():
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    model[0].bias.requires_grad_(False)
    x, y = torch.randn(16, 32), torch.randn(16, 4)
    est = mem.estimate_anatomy(model, optimizer="adam", example_input=x)
    got = mem.measure_anatomy(model, torch.optim.Adam(model.parameters()), x, y, F.mse_loss, "cpu")
    n_all = sum(p.numel() for p in model.parameters())
    n_train = n_all - 64
    assert (est.parameters, est.gradients, est.optimizer_state) == (4 * n_all, 4 * n_train, 8 * n_train)
    assert (got.parameters, got.gradients, got.optimizer_state) == (est.parameters, est.gradients, est.optimizer_state)
    assert est.activations > 0 and got.activations >= est.activations and got.peak > 0
    assert mem.estimate_anatomy(model, dtype=torch.bfloat16).parameters == 2 * n_all
    assert "activations" in mem.anatomy_table(est, got)


def test_timeline_grows_in_forward_and_shrinks_in_backward():
    model = nn.Sequential(nn.Linear(64, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 1))
    x = torch.randn(256, 64)
    with mem.memory_timeline("cpu") as tl:
        tl.mark("forward")
        loss = model(x).square().mean()
        tl.mark("backward")
        loss.backward()
        del loss
    end_forward = tl.bytes[tl.marks["backward"] - 1]
    assert end_forward >= 2 * 256 * 256 * 4  # both tanh outputs are kept for backward
    grads = sum(p.numel() * 4 for p in model.parameters())
    assert grads <= tl.bytes[-1] < grads + 256 * 256 * 4  # backward freed the activations, kept the gradients
    assert tl.peak_bytes >= end_forward and len(tl.ops) == len(tl.bytes)


def test_budget_error_reads_like_cudas_so_message_checks_recognise_it():
    """Recovery code written before torch.OutOfMemoryError checks the text: it must see an out-of-memory error."""
    with pytest.raises(RuntimeError) as info:
        with mem.MemoryBudget(1024, "cpu"):
            torch.empty(4096, dtype=torch.uint8)
    text = str(info.value)
    assert "out of memory" in text and "CUDA out of memory" in text and "Tried to allocate 4.00 KiB" in text
    assert "simulated" in text and "cpu" in text  # and it does not pretend to be a real GPU


def test_track_memory_inside_a_running_profiler_falls_back_to_watching_tensors():
    """Two profilers cannot run at once: inside one, the CPU path watches the tensors the block creates."""
    with torch.profiler.profile():
        with mem.track_memory("cpu") as m:
            keep = torch.empty(MiB, dtype=torch.uint8)
    assert m.method == "tensors" and m.current_bytes == MiB
    del keep


def test_free_memory_collects_tensors_held_only_by_a_reference_cycle():
    budget = mem.MemoryBudget(4 * MiB, "cpu")
    gc.disable()  # so that only free_memory can collect the cycle
    try:
        with budget:
            cycle = [torch.empty(MiB, dtype=torch.uint8)]
        cycle.append(cycle)
        del cycle
        assert budget.live_bytes == MiB
        mem.free_memory("cpu")
        assert budget.live_bytes == 0
    finally:
        gc.enable()


def test_format_bytes():
    assert mem.format_bytes(1536) == "1.50 KiB" and mem.format_bytes(12) == "12 B" and mem.format_bytes(None) == "n/a"


@pytest.mark.gpu
def test_cuda_track_memory_and_real_limit():
    d = torch.device("cuda")
    with mem.track_memory(d) as m:
        a = torch.empty(8 * MiB, dtype=torch.uint8, device=d)
        b = torch.empty(8 * MiB, dtype=torch.uint8, device=d)
        del b
    assert m.method == "cuda" and m.peak_bytes >= 16 * MiB and m.current_bytes >= 8 * MiB
    assert m.reserved_bytes >= m.current_bytes
    del a
    budget = mem.MemoryBudget(256 * MiB, d, use_cuda_limit=True)
    with pytest.raises(torch.OutOfMemoryError):
        with budget:
            torch.empty(budget.limit_bytes * 4, dtype=torch.uint8, device=d)
    mem.free_memory(d)
    sim = mem.MemoryBudget(MiB, d)
    with pytest.raises(torch.OutOfMemoryError):
        with sim:
            torch.empty(2 * MiB, dtype=torch.uint8, device=d)
    assert sim.live_bytes == 0


_FREES_AN_OLDER_TENSOR = """
import os, torch
from helpers import memory as mem
old = [torch.empty(2**20, dtype=torch.uint8) for _ in range(3)]  # made before any profiler ran
def block():
    old.pop()                                   # frees a tensor the profiler never saw allocated
    os.write(2, b"a line the measured code wrote\\n")
if {raw}:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True):
        block()
else:
    mem.measure_peak(block, "cpu")              # the path chapter 05's compare_precisions takes too
    with mem.track_memory("cpu"):
        old.pop()
"""


@pytest.mark.parametrize("raw", [True, False], ids=["raw-profiler", "helpers"])
def test_profiler_allocator_warning_never_reaches_stderr_but_other_lines_do(raw):
    """c10 logs "Memory block of unknown size ..." on fd 2 when a profiled block frees an older tensor."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _FREES_AN_OLDER_TENSOR.format(raw=raw)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "a line the measured code wrote" in proc.stderr  # nothing else is swallowed
    assert ("Memory block of unknown size" in proc.stderr) is raw  # the raw profiler shows the test can fail


def test_saved_for_backward_sees_what_eval_still_saves_and_nothing_under_no_grad():
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.5), nn.Linear(64, 4))
    x = torch.randn(32, 16)
    params = [*model.parameters(), x]
    model.eval()
    saved_eval = mem.saved_for_backward(lambda: model(x), exclude=params)
    assert saved_eval == 32 * 64 * 4  # the ReLU output (also the last Linear's input): one storage
    model.train()
    assert mem.saved_for_backward(lambda: model(x), exclude=params) > saved_eval  # plus dropout's mask and output
    with torch.no_grad():
        assert mem.saved_for_backward(lambda: model(x), exclude=params) == 0


def test_largest_blocks_reads_a_snapshot_without_a_gpu():
    """The snapshot reader of chapter 03 (section 10) on a snapshot written by hand in torch's documented layout."""
    frames_model = [{"filename": "/pytorch/c10/cuda/CUDACachingAllocator.cpp", "line": 900, "name": "malloc"},
                    {"filename": "/x/site-packages/torch/nn/modules/linear.py", "line": 125, "name": "forward"},
                    {"filename": "/home/me/03_memory.ipynb", "line": 4, "name": "train_step"}]
    snapshot = {"segments": [
        {"total_size": 20 * 2**20, "blocks": [
            {"size": 8 * 2**20, "requested_size": 8 * 2**20 - 100, "state": "active_allocated", "frames": frames_model},
            {"size": 12 * 2**20, "requested_size": 12 * 2**20, "state": "inactive", "frames": []}]},
        {"total_size": 2 * 2**20, "blocks": [
            {"size": 512, "requested_size": 400, "state": "active_allocated"}]}],
        "device_traces": [[]]}
    blocks = mem.largest_blocks(snapshot, n=5)
    assert [b.size for b in blocks] == [8 * 2**20, 512]  # the cached (inactive) block is no tensor's
    assert blocks[0].site == "/home/me/03_memory.ipynb:4 in train_step"  # torch's own frames, C++ and Python, skipped
    assert blocks[0].segment_size == 20 * 2**20 and blocks[1].site == ""
    assert [b.size for b in mem.largest_blocks(snapshot, n=1, states=("inactive",))] == [12 * 2**20]


def test_the_cpu_peak_reads_the_profiler_through_its_public_output():
    """Issue 23, finding 11: the profiler path reads export_chrome_trace's "[memory]" events, not kineto_results."""
    import inspect

    assert "kineto_results" not in inspect.getsource(mem)
    with mem.track_memory("cpu", method="profiler") as stats:
        a = torch.empty(2**20, dtype=torch.uint8)
        b = torch.empty(2**20, dtype=torch.uint8)
        del a
    assert stats.peak_bytes >= 2 * 2**20 and stats.current_bytes >= 2**20
    del b


def test_block_origin_names_the_line_or_says_why_there_is_none():
    """gpu-review-2 finding 12: frameless blocks of a snapshot are cuBLAS's workspace, or backward's on its own thread."""
    site = mem.SnapshotBlock(size=2**18, requested=2**18, state="active_allocated", segment_size=2**21,
                             site="/tmp/ipykernel_1/cell.py:7 in train_step")
    workspace = mem.SnapshotBlock(size=32 * 2**20, requested=32 * 2**20, state="active_allocated",
                                  segment_size=32 * 2**20, site="")
    grad = mem.SnapshotBlock(size=2**18, requested=2**18, state="active_allocated", segment_size=2**21, site="")
    assert mem.block_origin(site, {32 * 2**20}) == site.site
    assert mem.block_origin(workspace, {32 * 2**20}).startswith("cuBLAS's workspace")
    assert "autograd's device thread" in mem.block_origin(grad, {32 * 2**20})
    assert "autograd's device thread" in mem.block_origin(workspace)  # a torch that cannot tell the size


def test_blas_workspace_sizes_are_empty_where_torch_cannot_tell(monkeypatch):
    import types

    if not torch.cuda.is_available():
        assert mem.blas_workspace_sizes() == set()  # a CPU-only build, or torch before 2.13
    monkeypatch.setattr(torch.backends, "cuda", types.SimpleNamespace(
        cublas_workspace_size=lambda: 32 * 2**20, cublaslt_workspace_size=lambda: 32 * 2**20))
    assert mem.blas_workspace_sizes() == {32 * 2**20}
    monkeypatch.setattr(torch.backends, "cuda", types.SimpleNamespace(cublas_workspace_size=lambda: 8 * 2**20))
    assert mem.blas_workspace_sizes() == {8 * 2**20}
