"""Chapter 03's demonstrations say in words when the exercise they use is not right yet, and their CUDA
branches (the real device's budget, the memory snapshot read back) run here with torch.cuda stood in for.

The demo cells are skipped while grading, so tests/course/test_exercises.py never runs them; here the
accumulation demo runs with wrong submissions from tests/submissions/03_memory and must print that
`grad-accumulation` is not right yet, never raise a raw torch.testing error.
"""

import contextlib
import io

import pytest

from support.layout import load, solution_path, submissions
from helpers.i18n import tr  # the chapter's cells print through it (its opening cell imports it)


def _cell(nb, text):
    (source,) = [c.source for c in nb.cells if c.cell_type == "code" and text in c.source]
    return source


def _run_accumulation_demo(submission_source):
    nb = load(solution_path("03_memory"))
    opening = next(c for c in nb.cells if c.cell_type == "code" and "colab" not in c.metadata.get("tags", []))
    cells = [opening.source,
             _cell(nb, "def make_model("), submission_source, _cell(nb, "peak_big = mem.measure_peak(")]
    namespace, out = {}, io.StringIO()
    with contextlib.redirect_stdout(out):
        for source in cells:
            exec(compile(source, "<cell>", "exec"), namespace)  # noqa: S102 - the chapter's own cells
    return out.getvalue()


_WRONG = [s for s in submissions() if s.chapter == "03_memory" and s.solution == "grad-accumulation"
          and s.name in ("accumulation_zero_after_step", "accumulation_no_divide", "accumulation_zero_every_micro_batch")]


@pytest.mark.parametrize("sub", _WRONG, ids=lambda s: s.name)
def test_accumulation_demo_says_the_exercise_is_not_right_yet(sub):
    printed = _run_accumulation_demo(sub.source)
    assert "accumulate_gradients (exercise grad-accumulation) is not right yet" in printed
    assert "the same gradient" not in printed


def test_accumulation_demo_shows_the_same_gradient_for_the_reference():
    nb = load(solution_path("03_memory"))
    printed = _run_accumulation_demo(_cell(nb, "def accumulate_gradients("))
    assert "the same gradient" in printed and "not right yet" not in printed


def test_the_snapshot_cell_reads_back_what_it_wrote(tmp_path, monkeypatch):
    """Issue 23, finding 11: on CUDA, section 10 reads its memory snapshot back (here a snapshot in torch's layout)."""
    import pickle
    import types
    from unittest import mock

    import torch

    from helpers import memory as mem

    frames = [{"filename": "/x/site-packages/torch/optim/adam.py", "line": 300, "name": "_init_group"},
              {"filename": "/tmp/ipykernel_1/cell.py", "line": 7, "name": "train_step"}]
    snapshot = {"segments": [{"total_size": 2 * 2**20, "blocks": [
        {"size": 256 * 2**10, "requested_size": 256 * 2**10, "state": "active_allocated", "frames": frames},
        {"size": 256 * 2**10, "requested_size": 256 * 2**10, "state": "active_allocated", "frames": []},  # a gradient
        {"size": 2**20, "requested_size": 2**20, "state": "inactive", "frames": []}]},
        {"total_size": 32 * 2**20, "blocks": [  # cuBLAS's workspace, made by C++
            {"size": 32 * 2**20, "requested_size": 32 * 2**20, "state": "active_allocated", "frames": []}]}],
        "device_traces": [[{"action": "alloc"}, {"action": "segment_alloc"}, {"action": "alloc"}]]}
    recorded = []

    def dump(path):
        with open(path, "wb") as f:
            pickle.dump(snapshot, f)

    monkeypatch.chdir(tmp_path)
    nb = load(solution_path("03_memory"))
    namespace = {"tr": tr, "torch": torch, "mem": mem, "device": types.SimpleNamespace(type="cuda"),
                 "make_model": lambda: recorded.append("make_model") or torch.nn.Linear(2, 2),
                 "make_batch": lambda n: (None, None),
                 "train_step": lambda *args: None}
    out = io.StringIO()
    with mock.patch.object(torch.cuda, "is_available", return_value=True), \
            mock.patch.object(torch.cuda.memory, "_record_memory_history", lambda *a, **k: recorded.append((a, k))), \
            mock.patch.object(torch.cuda.memory, "_dump_snapshot", dump), \
            mock.patch.object(mem, "blas_workspace_sizes", lambda: {32 * 2**20}), contextlib.redirect_stdout(out):
        exec(compile(_cell(nb, "_dump_snapshot("), "<cell>", "exec"), namespace)  # noqa: S102 - the chapter's own cell
    printed = out.getvalue()
    assert recorded[-1] == ((), {"enabled": None})  # recording stopped
    # gpu-review-2 finding 12: recording starts before the model is built, so its parameters carry frames
    assert recorded.index("make_model") > 0 and recorded[0][1]["stacks"] == "python"
    assert "2 segments, 34.00 MiB reserved; 3 live blocks of 4, 32.50 MiB allocated" in printed
    assert "2 allocations and 1 cudaMalloc calls recorded" in printed
    assert "/tmp/ipykernel_1/cell.py:7 in train_step" in printed  # who allocated a live block
    assert "32.00 MiB in 1 blocks, from cuBLAS's workspace" in printed  # labelled by its size
    assert "256.00 KiB in 1 blocks, from no Python frame: allocated before recording began, or by backward" in printed


def test_on_a_gpu_the_budget_is_the_real_devices(monkeypatch):
    """Issue 23, finding 11: with CUDA, section 6's budget is free memory plus the allocator's unused cache, not 8 MiB."""
    import types

    import torch
    from torch import nn

    from helpers import memory as mem

    nb = load(solution_path("03_memory"))
    # only the cell sees the stand-in: torch's own code (Adam asks torch.cuda too) keeps the real torch.cuda,
    # which on a CUDA build without a driver raises instead of answering
    cuda = types.SimpleNamespace(is_available=lambda: True, mem_get_info=lambda d: (70 * 2**30, 80 * 2**30),
                                 memory_reserved=lambda d: 300 * 2**20, memory_allocated=lambda d: 100 * 2**20)
    namespace = {"tr": tr, "torch": types.SimpleNamespace(optim=torch.optim, cuda=cuda), "F": torch.nn.functional, "mem": mem,
                 "MiB": 2**20, "device": types.SimpleNamespace(type="cuda"),
                 "make_model": lambda: nn.Linear(128, 10), "make_batch": lambda n: (torch.randn(n, 128), torch.randn(n, 10))}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(_cell(nb, "budget_bytes = "), "<cell>", "exec"), namespace)  # noqa: S102 - the chapter's own cell
    assert namespace["budget_bytes"] == 70 * 2**30 + 200 * 2**20
    assert "memory budget: the real GPU's" in out.getvalue()


def test_without_a_gpu_the_budget_is_simulated_and_says_so():
    import torch

    from helpers import memory as mem

    nb = load(solution_path("03_memory"))
    namespace = {"tr": tr, "torch": torch, "F": torch.nn.functional, "mem": mem, "MiB": 2**20, "device": torch.device("cpu"),
                 "make_model": lambda: torch.nn.Linear(128, 10),
                 "make_batch": lambda n: (torch.randn(n, 128), torch.randn(n, 10))}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(_cell(nb, "budget_bytes = "), "<cell>", "exec"), namespace)  # noqa: S102 - the chapter's own cell
    assert namespace["budget_bytes"] == 8 * 2**20 and "memory budget: simulated" in out.getvalue()
