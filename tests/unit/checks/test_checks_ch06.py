"""helpers.checks.ch06: the verdicts name each mistake, one launch serves both training cells, and grading
never stalls: a hanging or killed learner function ends in a CheckFailed that says so, in bounded time.

Most tests feed the verdicts synthetic per-rank records (no processes). The whole chapter, with every wrong
submission, runs in tests/course/test_exercises.py.
"""

import re
import textwrap
import threading
import time

import pytest
import torch

from support.layout import no_child_left
from helpers.checks import CheckFailed, ch06
from helpers.processes import busy_factor
from helpers.models import make_regression


def cell(source: str) -> dict:
    namespace = {"__name__": "__main__"}
    exec(compile(textwrap.dedent(source), "<cell>", "exec"), namespace)
    return namespace


# --------------------------------------------------------------------------- the single-process reference


def test_reference_depends_on_set_epoch_only_after_the_first_epoch():
    x, y = make_regression(12, 5, seed=1)
    args = dict(world_size=2, batch_size=2, lr=0.1, seed=0)
    one_epoch = [ch06.reference_weights(x, y, epochs=1, set_epoch=s, **args) for s in (True, False)]
    assert all(torch.equal(one_epoch[0][k], one_epoch[1][k]) for k in one_epoch[0])
    three = [ch06.reference_weights(x, y, epochs=3, set_epoch=s, **args) for s in (True, False)]
    assert ch06._largest_gap(three[0], three[1]) > 1e-3  # big enough that the check can tell them apart


def test_reference_shards_are_distributed_samplers():
    shards = ch06._shards(11, 2, seed=5, epoch=1)
    assert len(shards[0]) == len(shards[1]) == 6  # padded to an even split, as DistributedSampler does
    assert set(shards[0]) | set(shards[1]) == set(range(11))


# --------------------------------------------------------------------------- exercise 1 verdicts, synthetic


def outcome(records, n=12, epochs=3, **changes):
    x, y = make_regression(n, 5, seed=100)
    case = {"epochs": epochs, "batch_size": 2, "lr": 0.1, "seed": 0, "world_size": 2, **changes}
    expected = ch06.reference_weights(x, y, 2, epochs, 2, 0.1, 0)
    return ch06.TrainOutcome(case, x, y, expected, records, None)


def record(trained, **notes):
    base = {"wraps": 1, "moved_before": True, "moved_after": False, "rows": 18, "set_epoch": [0, 1, 2],
            "saves": [], "loads": [], "early_load": False, "trained": trained, "returned": None, "error": None}
    return {**base, **notes}


def test_diagnose_names_ranks_that_trained_alone():
    o = outcome([])
    other = {k: v + 1 for k, v in o.expected.items()}
    with pytest.raises(CheckFailed, match="different weights"):
        ch06._diagnose(o, [o.expected, other], o.expected)


def test_diagnose_names_the_whole_dataset_on_every_rank():
    o = outcome([record(None, rows=36), record(None, rows=36)])
    wrong = {k: v + 1 for k, v in o.expected.items()}
    with pytest.raises(CheckFailed, match="whole dataset"):
        ch06._diagnose(o, [wrong, wrong], o.expected)


def test_diagnose_names_a_missing_set_epoch():
    o = outcome([record(None, set_epoch=[]), record(None, set_epoch=[])])
    same_order = ch06.reference_weights(o.x, o.y, 2, 3, 2, 0.1, 0, set_epoch=False)
    with pytest.raises(CheckFailed, match="same order every epoch"):
        ch06._diagnose(o, [same_order, same_order], o.expected)


def test_diagnose_falls_back_to_what_to_compare():
    o = outcome([record(None), record(None)])
    wrong = {k: v * 0 for k, v in o.expected.items()}
    with pytest.raises(CheckFailed, match="differ from one process"):
        ch06._diagnose(o, [wrong, wrong], o.expected)


@pytest.mark.parametrize("flags, words", [
    ({"zero_grad": False}, "zero_grad()"),
    ({"sampler_seeds": [0, 0]}, "without seed="),
    ({"sampler_seeds": [2, 3]}, "seed + rank"),
    ({"sampler_seeds": [0, 1]}, "its rank"),
])
def test_diagnose_replays_each_mistake_and_names_the_one_that_matches(flags, words):
    """Ranks that agree but differ from the reference: the run is replayed with each mistake (issue 22)."""
    x, y = make_regression(12, 5, seed=102)
    case = {"epochs": 3, "batch_size": 2, "lr": 0.1, "seed": 2, "world_size": 2}
    o = ch06.TrainOutcome(case, x, y, ch06.reference_weights(x, y, 2, 3, 2, 0.1, 2), [record(None)] * 2, None)
    wrong = ch06.reference_weights(x, y, 2, 3, 2, 0.1, 2, **flags)
    with pytest.raises(CheckFailed, match=re.escape(words)):
        ch06._diagnose(o, [wrong, wrong], o.expected)


def test_a_learner_error_naming_nccl_is_told_to_use_gloo_on_the_cpu():
    assert "for CPU tensors use gloo" in ch06._hint("Distributed package doesn't have NCCL built in")
    assert "for CPU tensors use gloo" in ch06._hint("ProcessGroupNCCL is only supported with GPUs, no GPUs found!")


# --------------------------------------------------------------------------- exercise 2 verdicts, synthetic


def grads_record(mine, local, reduced=False):
    return {"mine": mine, "local": local, "error": None, "weights_reduced": reduced}


LOCAL = [[torch.tensor([1.0, 2.0]), torch.tensor([3.0])], [torch.tensor([3.0, 4.0]), torch.tensor([5.0])]]
MEAN = [torch.tensor([2.0, 3.0]), torch.tensor([4.0])]


@pytest.mark.parametrize("mine, words", [
    ([m * 2 for m in MEAN], "summed over the 2 processes"),
    ([m * 0.5 for m in MEAN], "0.5 times DDP's"),
    (LOCAL[0], "nothing was exchanged"),
    ([g / 2 for g in LOCAL[0]], "only scaled"),
    ([None, MEAN[1]], "a gradient was removed"),
])
def test_gradient_verdicts_name_the_mistake(mine, words):
    with pytest.raises(CheckFailed, match=words):
        ch06._check_rank_grads(0, grads_record(mine, LOCAL[0]), MEAN, 2)


def test_gradient_verdict_passes_the_mean_and_names_reduced_weights():
    ch06._check_rank_grads(0, grads_record([m.clone() for m in MEAN], LOCAL[0]), MEAN, 2)
    with pytest.raises(CheckFailed, match="the weights, not the gradients"):
        ch06._check_rank_grads(0, grads_record(LOCAL[0], LOCAL[0], reduced=True), MEAN, 2)


def test_avg_then_divide_is_told_that_avg_already_divides():
    rec = {**grads_record([m * 0.5 for m in MEAN], LOCAL[0]), "avg": True}
    with pytest.raises(CheckFailed, match="ReduceOp.AVG already divides .* 1/world_size"):
        ch06._check_rank_grads(0, rec, MEAN, 2)


@pytest.mark.parametrize("before, words", [(0, "frozen with requires_grad=False"),
                                           (3, "a filter on p.requires_grad lets it through")])
def test_a_none_passed_to_all_reduce_names_the_filter(before, words):
    """None before any gradient: no filter at all; after some: a requires_grad filter met the unused layer."""
    with pytest.raises(CheckFailed, match=words):
        ch06._check_none_reduced(1, {"none_reduced": before})
    ch06._check_none_reduced(1, {"none_reduced": None})


def test_only_rank_0_dividing_is_told_every_rank_must_divide(monkeypatch):
    records = [grads_record([m.clone() for m in MEAN], LOCAL[0]), grads_record([m * 2 for m in MEAN], LOCAL[1])]
    monkeypatch.setattr(ch06, "_launch", lambda *a: (records, None))
    words = r"equal DDP.s on rank\(s\) \[0\] but not on rank\(s\) \[1\]: every rank must divide"
    with pytest.raises(CheckFailed, match=words):
        ch06.check_average_gradients(lambda model: None)


def test_every_rank_has_connected_before_the_learner_code_runs(monkeypatch):
    """A rank that raises at once must not leave while a peer still connects (gloo: "connectFullMesh failed")."""
    import torch.distributed as dist

    from helpers.processes import free_port

    order = []
    real = dist.barrier
    monkeypatch.setattr(dist, "barrier", lambda *a, **k: order.append("barrier") or real(*a, **k))
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    stub = cell("def average_gradients(model):\n    order.append('learner')\n    raise NotImplementedError()\n")
    stub["order"] = order
    x, y = make_regression(4, 4, seed=0)
    rec = ch06.graded_average(0, 1, stub["average_gradients"], x, y, 0, True, True)
    assert order == ["barrier", "learner"] and not dist.is_initialized()
    assert "not written yet" in rec["error"]["message"]


def test_a_blank_average_gradients_is_not_written_yet_on_3_ranks():
    stub = cell("def average_gradients(model):\n    raise NotImplementedError()\n")["average_gradients"]
    with no_child_left(), pytest.raises(CheckFailed, match="`average_gradients` is not written yet"):
        ch06.check_average_gradients(stub, world_size=3, frozen=True, unused=True)


def test_a_frozen_parameter_must_keep_no_gradient():
    with pytest.raises(CheckFailed, match="frozen"):
        ch06._check_rank_grads(0, grads_record([torch.ones(2), MEAN[1]], [None, LOCAL[0][1]]), [None, MEAN[1]], 2)


# --------------------------------------------------------------------------- real launches: bounded, cached


def test_one_launch_serves_both_training_cells(monkeypatch):
    launches = []
    real = ch06._launch
    monkeypatch.setattr(ch06, "_launch", lambda *a: launches.append(a) or real(*a))
    stub = cell("def train_ddp(rank, world_size, x, y, checkpoint, epochs=2, batch_size=4, lr=0.05, seed=0):\n"
                "    raise NotImplementedError()\n")["train_ddp"]
    for verdict in (ch06.check_ddp_weights, ch06.check_ddp_checkpoint):
        with pytest.raises(CheckFailed, match="`train_ddp` is not written yet"):
            verdict(stub, n=9, seed=11)
    assert len(launches) == 1


def test_a_hanging_learner_ends_in_a_verdict(monkeypatch):
    monkeypatch.setattr(ch06, "LIMIT", 8.0)
    hang = cell("def average_gradients(model):\n    while True:\n        pass\n")["average_gradients"]
    start, factor = time.monotonic(), busy_factor()
    with no_child_left(), pytest.raises(CheckFailed, match="did not end"):
        ch06.check_average_gradients(hang)
    # bounded: the check's limit grows with the machine's load (8 s x runnable processes per core), no more
    assert time.monotonic() - start < 8.0 * max(factor, busy_factor()) + 22


def test_a_rank_killed_halfway_names_the_rank():
    killer = cell("""
        import os, signal
        def average_gradients(model):
            import torch.distributed as dist
            if dist.get_rank() == 1:
                os.kill(os.getpid(), signal.SIGKILL)
    """)["average_gradients"]
    with pytest.raises(CheckFailed, match="rank 1 died"):
        ch06.check_average_gradients(killer)


def test_a_function_that_cannot_travel_is_named():
    def outer():
        k = threading.Lock()  # a closure travels (cloudpickle); a lock it holds does not

        def average_gradients(model):
            return k

        return average_gradients

    with pytest.raises(CheckFailed, match="cannot run in another process"):
        ch06.check_average_gradients(outer())
