"""helpers.dataloader: the datasets chapter 04 measures, loader timing, the course's loader and worker seeding.

Worker counts and sizes are tiny; no test asserts a speed, only ratios with wide margins (docs/STACK_NOTES.md,
"DataLoader"). Every test that starts workers checks that none is left behind.
"""

import pickle

import numpy as np
import pytest
import torch
from torch.utils.data import ConcatDataset, DataLoader, RandomSampler

from helpers import dataloader as dl


@pytest.fixture
def no_worker_left():
    """After the test, no DataLoader worker of this process is alive."""
    yield
    import gc

    gc.collect()
    left = dl.worker_processes()
    assert not left, f"worker processes left behind: {[p.cmdline() for p in left]}"


# --------------------------------------------------------------------------- datasets


@pytest.mark.parametrize("make", [lambda: dl.SleepDataset(n=5, item_s=0.0), lambda: dl.CpuDataset(n=5, work=10)])
def test_traced_items_say_what_who_and_when(make):
    data = make()
    assert len(data) == 5
    item = data[3]
    assert set(item) == {"x", "y", "worker", "t0", "t1"}
    assert item["worker"] == -1 and item["t0"] <= item["t1"]
    torch.testing.assert_close(item["y"], item["x"].sum().reshape(1))
    torch.testing.assert_close(data[3]["x"], item["x"])  # the same item whatever process makes it
    assert not torch.equal(data[2]["x"], item["x"])


def test_sleep_dataset_waits_its_item_cost(monkeypatch):
    slept = []
    monkeypatch.setattr(dl.time, "sleep", slept.append)
    dl.SleepDataset(n=3, item_s=0.25)[1]
    assert slept == [0.25]


@pytest.mark.parametrize("bad", [lambda: dl.SleepDataset(n=0), lambda: dl.SleepDataset(item_s=-1),
                                 lambda: dl.CpuDataset(work=-5), lambda: dl.CpuDataset(features=0)])
def test_bad_sizes_are_refused(bad):
    with pytest.raises(ValueError, match="must be"):
        bad()


def test_index_out_of_range_is_an_index_error():
    with pytest.raises(IndexError, match="out of range"):
        dl.SleepDataset(n=2, item_s=0.0)[2]


def test_datasets_pickle_for_spawn():
    for data in (dl.SleepDataset(n=2), dl.CpuDataset(n=2), dl.ClonedRngDataset(n=2)):
        assert type(pickle.loads(pickle.dumps(data))) is type(data)
    assert pickle.loads(pickle.dumps(dl.seed_worker)) is dl.seed_worker


def _draws(loader):
    per_worker = {}
    for item in loader:
        per_worker.setdefault(item["worker"], []).append(item["draw"])
    return per_worker


def test_cloned_generator_repeats_in_every_worker(no_worker_left):
    """The bug chapter 04 measures: a Generator made in __init__ is copied into each worker."""
    draws = _draws(DataLoader(dl.ClonedRngDataset(n=6), batch_size=None, num_workers=2))
    assert draws[0] == draws[1]


def test_seed_worker_gives_each_worker_and_epoch_its_own_stream(no_worker_left):
    def epochs(seed):
        loader = DataLoader(dl.ClonedRngDataset(n=6), batch_size=None, num_workers=2, worker_init_fn=dl.seed_worker,
                            generator=torch.Generator().manual_seed(seed))
        return [_draws(loader) for _ in range(2)]

    first, again = epochs(0), epochs(0)
    assert first[0][0] != first[0][1], "workers drew the same numbers"
    assert first[0] != first[1], "the second epoch repeated the first"
    assert first == again, "the same loader seed did not repeat the draws"


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_stream_repeats_in_every_worker_unless_it_shards(no_worker_left, method):
    """An IterableDataset is copied into each worker; RangeStream(shard=True) splits it with get_worker_info."""
    def items(shard):
        loader = DataLoader(dl.RangeStream(n=7, shard=shard), batch_size=None, num_workers=2,
                            multiprocessing_context=method, timeout=120)
        return sorted(item["item"] for item in loader)

    assert items(False) == sorted(list(range(7)) * 2)
    assert items(True) == list(range(7))
    assert [item["item"] for item in dl.RangeStream(n=3)] == [0, 1, 2]  # the main process: one copy, all items


def test_block_sums_read_a_list_or_an_array_alike():
    values = [float(i) for i in range(1000)]
    as_list, as_array = dl.BlockSums(values, blocks=10), dl.BlockSums(np.array(values), blocks=10)
    assert len(as_list) == len(as_array) == 10
    assert [as_list[i] for i in range(10)] == [as_array[i] for i in range(10)] == [sum(values[i * 100:(i + 1) * 100])
                                                                                   for i in range(10)]


def test_reading_python_objects_in_a_forked_worker_copies_them(no_worker_left):
    """Copy-on-read, as chapter 04 measures it: reading a list of floats grows the forked worker by about the
    objects' size (reference counts written); reading an array of the same values does not."""
    import sys

    n = 400_000
    growth = {}
    for label, values in {"list": [float(i) for i in range(n)], "array": np.arange(n, dtype=np.float64)}.items():
        loader = DataLoader(dl.BlockSums(values, blocks=40), batch_size=None, num_workers=1, persistent_workers=True,
                            multiprocessing_context="fork")
        it = iter(loader)
        next(it)
        before = dl.worker_memory()
        sum(it)
        growth[label] = dl.worker_memory()[0] - before[0]
        del it, loader
    objects = n * sys.getsizeof(1.0)
    assert growth["list"] - growth["array"] > objects / 2, (growth, objects)


def test_seed_worker_does_nothing_in_the_main_process():
    data = dl.ClonedRngDataset(n=2)
    rng = data.rng
    dl.seed_worker(0)
    assert data.rng is rng


def test_every_dataset_works_under_spawn(no_worker_left):
    """Forced spawn once, so Linux CI catches a dataset or worker_init_fn that only works under fork."""
    data = ConcatDataset([dl.SleepDataset(n=2, item_s=0.0), dl.CpuDataset(n=2, work=10), dl.ClonedRngDataset(n=2)])
    items = list(DataLoader(data, batch_size=None, num_workers=2, multiprocessing_context="spawn",
                            worker_init_fn=dl.seed_worker, timeout=120))
    assert len(items) == 6
    assert {item["worker"] for item in items} <= {0, 1}


# --------------------------------------------------------------------------- the course's loader


def test_make_loader_pins_only_for_cuda():
    data = dl.SleepDataset(n=4, item_s=0.0)
    assert dl.make_loader(data, "cuda:1").pin_memory is True  # settings only: nothing is iterated
    assert dl.make_loader(data, torch.device("cuda")).pin_memory is True
    assert dl.make_loader(data, "cpu").pin_memory is False
    assert dl.make_loader(data, "mps").pin_memory is False


def test_make_loader_sets_worker_options_only_with_workers():
    data = dl.SleepDataset(n=4, item_s=0.0)
    with_workers = dl.make_loader(data, "cpu", num_workers=2, prefetch_factor=3)
    assert (with_workers.persistent_workers, with_workers.prefetch_factor) == (True, 3)
    without = dl.make_loader(data, "cpu", num_workers=0)
    assert (without.persistent_workers, without.prefetch_factor) == (False, None)
    with pytest.raises(ValueError, match="num_workers"):
        dl.make_loader(data, "cpu", num_workers=-1)


def test_make_loader_shuffles_reproducibly():
    data = torch.utils.data.TensorDataset(torch.arange(20))

    def order(seed):
        return [int(v) for (batch,) in dl.make_loader(data, "cpu", batch_size=5, seed=seed) for v in batch]

    assert isinstance(dl.make_loader(data, "cpu").sampler, RandomSampler)
    assert order(3) == order(3) and sorted(order(3)) == list(range(20))
    assert order(3) != order(4)


# --------------------------------------------------------------------------- measuring loaders


def test_loader_run_counts_samples_and_startup(no_worker_left):
    run = dl.loader_run(DataLoader(dl.SleepDataset(n=10, item_s=0.0), batch_size=4, num_workers=2))
    assert (run.num_workers, run.samples, run.samples_after_first) == (2, 10, 6)
    assert 0 < run.startup_s <= run.total_s
    assert run.epoch_rate > 0 and "2 workers" in str(run)


def test_loader_run_of_an_empty_loader():
    run = dl.loader_run([])
    assert run.samples == 0 and run.startup_s == run.total_s


def test_sweep_waiting_items_scale_with_workers(no_worker_left):
    """Sleeping items need no CPU, so 4 workers load them much faster than the main process alone."""
    points = dl.sweep_workers(dl.SleepDataset(n=32, item_s=0.01), counts=(0, 4), batch_size=4, progress=False)
    assert [p.num_workers for p in points] == [0, 4]
    rate = {p.num_workers: p.steady_rate for p in points}
    assert rate[4] >= 1.5 * rate[0], rate
    assert all(p.startup_s > 0 and p.first_epoch_rate > 0 for p in points)
    assert "4 workers" in str(points[1])


def test_sweep_repeats_every_figure_so_the_verdicts_can_judge_it(no_worker_left):
    """Three fresh loaders of two epochs per count: three start-ups and three steady epochs, kept as Timings."""
    from helpers.benchmark import Timing

    points = dl.sweep_workers(dl.SleepDataset(n=8, item_s=0.0), counts=(0, 2), batch_size=4, progress=False)
    for point, label in zip(points, ("0 workers", "2 workers")):
        assert isinstance(point.first, Timing) and isinstance(point.steady, Timing)
        assert len(point.first.times) == 3 and len(point.steady.times) == 3
        assert point.first.label == point.steady.label == label
        assert point.steady_rate == pytest.approx(8 / point.steady.median)
        assert point.first_epoch_rate == pytest.approx(8 / point.first.median)
    assert "3 epochs" in str(points[0])
    more = dl.sweep_workers(dl.SleepDataset(n=4, item_s=0.0), counts=(0,), batch_size=2, progress=False, starts=2,
                            epochs=4)
    assert len(more[0].first.times) == 2 and len(more[0].steady.times) == 6
    with pytest.raises(ValueError, match="epochs >= 2"):
        dl.sweep_workers(dl.SleepDataset(n=4, item_s=0.0), counts=(0,), epochs=1, progress=False)


def test_the_bottleneck_is_named_only_beyond_the_noise():
    steady = dl.StepTimes(load=[0.010, 0.011, 0.009, 0.010], copy=[1e-5] * 4, compute=[0.001, 0.0011, 0.0009, 0.001],
                          num_threads=2)
    assert steady.describe_bottleneck() == ("the bottleneck is load: load takes 10.0x as long as compute "
                                            "(9.05x to 11.1x, from their spreads)")  # bands of 10 %: the floor
    assert steady.timings()["compute"].num_threads == 2
    busy = dl.StepTimes(load=[0.0001, 0.030, 0.0002, 0.025, 0.0003], copy=[1e-5] * 5,
                        compute=[0.002, 0.003, 0.002, 0.0025, 0.002])
    assert busy.bottleneck() == "compute"  # the largest median ...
    text = busy.describe_bottleneck()  # ... but the waits for a batch spread over 0 to 30 ms
    assert text.startswith("no single bottleneck: compute and load are within the noise on this machine")
    assert "load IQR" in text


def test_time_steps_splits_each_step():
    seen = []
    loader = DataLoader(dl.SleepDataset(n=12, item_s=0.005), batch_size=3)
    times = dl.time_steps(loader, seen.append, "cpu")
    assert len(seen) == 4 and len(times.load) == len(times.copy) == len(times.compute) == 3  # first step left out
    assert times.bottleneck() == "load"  # a step that does nothing waits for 15 ms of sleeping items
    assert set(times.medians()) == {"load", "copy", "compute"}
    assert len(dl.time_steps(loader, seen.append, "cpu", steps=2).load) == 1
    assert times.num_threads == torch.get_num_threads()


def test_plots_draw_what_was_measured():
    import matplotlib.pyplot as plt

    from helpers.plots import new_figure, plot_sweep

    batches = list(DataLoader(dl.SleepDataset(n=6, item_s=0.0), batch_size=3))
    points = [dl.SweepPoint(0, 0.01, 90.0, 100.0), dl.SweepPoint(2, 0.05, 150.0, 180.0)]
    steps = dl.StepTimes(load=[0.01], copy=[0.001], compute=[0.002])
    sweep_fig, ax = new_figure()
    plot_sweep(ax, {"sleep": points}, "num_workers", "steady_rate", mark=(2, "2 cores"))
    for fig in (sweep_fig, dl.plot_step_times({"0 workers": steps}),
                dl.plot_timeline({"p=1": batches})):
        assert fig.axes and any(ax.lines or ax.patches for ax in fig.axes)
        plt.close(fig)


def test_worker_memory_sees_live_workers_only(no_worker_left):
    loader = DataLoader(dl.SleepDataset(n=4, item_s=0.0), batch_size=2, num_workers=2, persistent_workers=True)
    next(iter(loader))
    sizes = dl.worker_memory()
    assert len(sizes) == 2 and all(s > 0 for s in sizes)
    assert dl.worker_memory(exclude=[p.pid for p in dl.worker_processes()]) == []
    del loader


# --------------------------------------------------------------------------- host -> device


def test_copy_bandwidth_needs_cuda():
    if torch.cuda.is_available():
        assert dl.copy_bandwidth(2**20, "cuda", pinned=True, min_run_time=0.05) > 0
    with pytest.raises(RuntimeError, match="CUDA"):
        dl.copy_bandwidth(2**20, "cpu", pinned=False)
    with pytest.raises(RuntimeError, match="CUDA"):
        dl.copy_timing(2**20, "cpu", pinned=True)
    if torch.cuda.is_available():
        timing = dl.copy_timing(2**20, "cuda", pinned=True, min_run_time=0.05)
        assert timing.label == "pinned" and timing.nbytes == 2**20 and timing.bytes_per_s > 0


def test_prefetcher_on_the_cpu_moves_on_demand():
    loader = DataLoader(dl.SleepDataset(n=6, item_s=0.0), batch_size=2)
    prefetcher = dl.DevicePrefetcher(loader, "cpu")
    assert not prefetcher.overlaps and len(prefetcher) == 3
    got = [b["x"] for b in prefetcher]
    torch.testing.assert_close(torch.cat(got), torch.cat([b["x"] for b in loader]))


@pytest.mark.gpu
def test_prefetcher_on_cuda_overlaps_and_keeps_order():
    loader = DataLoader(dl.SleepDataset(n=6, item_s=0.0), batch_size=2, pin_memory=True)
    prefetcher = dl.DevicePrefetcher(loader, "cuda")
    got = [b["x"] for b in prefetcher]
    assert prefetcher.overlaps and all(x.is_cuda for x in got)
    torch.testing.assert_close(torch.cat(got).cpu(), torch.cat([b["x"] for b in loader]))


# --------------------------------------------------------------------------- the chapter


@pytest.mark.slow
def test_chapter_leaves_no_worker_behind():
    """Run the whole chapter in a real kernel, then ask that kernel for its children: none may be a worker."""
    import nbformat
    from nbclient import NotebookClient

    from support.layout import load, solution_path

    nb = load(solution_path("04_dataloader"))
    nb.cells.append(nbformat.v4.new_code_cell(
        "import gc\nfrom helpers import dataloader as _dl\ngc.collect()\n"
        "print('LEFT', [p.cmdline() for p in _dl.worker_processes()])"))
    NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    last = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    assert "LEFT []" in last, last
