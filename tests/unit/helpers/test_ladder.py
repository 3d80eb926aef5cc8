"""helpers.ladder: chapter 09's model, FLOP count, measured peak and rungs, at sizes that take a moment on a CPU."""

import dataclasses

import pytest
import torch
from torch.utils.data import DataLoader

from helpers import ladder


def test_sdpa_and_the_written_out_attention_compute_the_same_block():
    torch.manual_seed(0)
    naive = ladder.Block(dim=16, heads=2)
    fused = ladder.Block(dim=16, heads=2, sdpa=True)
    fused.load_state_dict(naive.state_dict())
    x = torch.randint(0, ladder.VOCAB, (3, 5))  # token ids, as a language model reads them
    torch.testing.assert_close(naive(x), fused(x), rtol=1e-5, atol=1e-6)
    assert naive(x).shape == (3, 10)


def test_a_step_counts_forward_and_backward_by_module_and_leaves_no_gradients():
    model = ladder.Block(dim=16, heads=2)
    x, y = torch.randint(0, ladder.VOCAB, (4, 6)), torch.randint(0, 10, (4,))
    flops = ladder.step_flops(model, x, y)
    assert flops.forward > 0 and flops.backward == flops.total - flops.forward
    assert 2.5 * flops.forward < flops.total <= 3 * flops.forward  # the first product needs no input gradient
    assert flops.by_module["Global"] == flops.total
    assert flops.by_module["Block.mlp.0"] == 3 * 2 * 4 * 6 * 16 * 64  # forward 2·M·N·K, backward twice that
    assert all(p.grad is None for p in model.parameters())


def test_the_measured_peak_is_the_best_size_with_its_spread():
    peak = ladder.measured_peak("cpu", torch.float32, sizes=(16, 32), min_run_time=0.01)
    assert peak.size in (16, 32) and peak.flops_per_s == peak.timing.flops_per_s > 0
    low, high = peak.band
    assert low <= peak.flops_per_s <= high


def test_each_rung_adds_exactly_one_change_to_the_one_below():
    rungs = ladder.ladder(torch.bfloat16)
    assert rungs[0] == ladder.Rung("plain fp32")
    fields = [f.name for f in dataclasses.fields(ladder.Rung) if f.name not in ("name", "change")]
    for below, rung in zip(rungs, rungs[1:]):
        changed = [f for f in fields if getattr(below, f) != getattr(rung, f)]
        assert len(changed) == 1, (rung.name, changed)
    assert rungs[-1].compiled and rungs[-1].amp_dtype == torch.bfloat16
    assert [ladder.slug(r.name) for r in rungs][:5] == ["plain_fp32", "sync_free", "fed_loader", "tf32", "autocast"]


def test_the_data_are_token_ids_a_batch_of_which_is_small():
    x, y = ladder.make_data(6, 256)[:]
    assert x.dtype == torch.int64 and x.shape == (6, 256) and 0 <= int(x.min()) and int(x.max()) < ladder.VOCAB
    assert y.shape == (6,)


@pytest.mark.parametrize("tf32", [True, False])
def test_a_rung_or_a_peak_in_tf32_puts_torchs_matmul_precision_back(tf32):
    before = torch.get_float32_matmul_precision()
    seen = []
    with ladder.matmul_precision(tf32):
        seen.append(torch.get_float32_matmul_precision())
    assert seen == ["high" if tf32 else "highest"] and torch.get_float32_matmul_precision() == before
    peak = ladder.measured_peak("cpu", torch.float32, sizes=(16,), min_run_time=0.01, rounds=1, tf32=tf32)
    assert peak.name == ("tf32" if tf32 else "float32") and torch.get_float32_matmul_precision() == before


def test_below_the_fused_rung_the_optimizer_is_torchs_default_and_the_fused_rung_changes_only_that():
    rungs = [r for r in ladder.ladder(torch.bfloat16) if not r.compiled]
    runs = ladder.climb(rungs, ladder.make_data(8, 4), "cpu", batch=4, dim=8, repeats=1)
    groups = {run.rung.name: run.optimizer.param_groups[0] for run in runs}
    default = torch.optim.AdamW([torch.zeros(1, requires_grad=True)]).param_groups[0]
    assert groups["autocast"]["foreach"] == default["foreach"] and not groups["autocast"]["fused"]
    assert groups["fused AdamW"]["fused"]


def test_the_sync_free_loop_trains_as_the_plain_one_and_returns_floats():
    data = ladder.make_data(12, 4)
    results = []
    for rung in (ladder.Rung("plain"), ladder.Rung("sync-free", sync_free=True)):
        torch.manual_seed(0)
        model = ladder.Block(dim=8, heads=2)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        losses = ladder.train_steps(model, optimizer, DataLoader(data, batch_size=4), torch.device("cpu"), rung)
        results.append((losses, [p.detach().clone() for p in model.parameters()]))
    assert all(type(v) is float for v in results[1][0]) and len(results[1][0]) == 3
    assert results[0][0] == pytest.approx(results[1][0])
    for a, b in zip(results[0][1], results[1][1]):
        torch.testing.assert_close(a, b)


def test_climb_times_every_rung_and_only_a_compiled_one_has_a_compile_time():
    rungs = [r for r in ladder.ladder(torch.bfloat16) if not r.compiled]
    runs = ladder.climb(rungs, ladder.make_data(8, 4), "cpu", batch=4, dim=8, repeats=3)
    assert [run.rung for run in runs] == rungs
    assert all(len(run.timing.times) == 3 and run.timing.median > 0 and run.compile_s is None for run in runs)


def test_a_spread_wider_than_the_median_leaves_no_upper_bound():
    from types import SimpleNamespace

    from helpers.ladder import rate_band

    low, high = rate_band(100.0, SimpleNamespace(median=1.0, iqr=0.5))
    assert (low, high) == (100.0 / 1.25, 100.0 / 0.75)
    assert rate_band(100.0, SimpleNamespace(median=1.0, iqr=3.0)) == (40.0, float("inf"))


def test_a_rungs_verdicts_name_it_in_the_learners_language(monkeypatch):
    """The name is a key (slug) in English and is shown translated: bench.compare's sentences read the timing's
    label, so in the Korean edition the label is the Korean name."""
    from helpers import i18n

    monkeypatch.setattr(i18n, "_chosen", "ko")
    rungs = ladder.ladder(torch.bfloat16)[:2]
    runs = ladder.climb(rungs, ladder.make_data(8, 4), "cpu", batch=4, dim=8, repeats=1)
    assert [run.rung.name for run in runs] == ["plain fp32", "sync-free"]
    assert [run.timing.label for run in runs] == [i18n._("plain fp32"), i18n._("sync-free")]
    assert runs[1].timing.label != "sync-free"  # the Korean catalog has it
