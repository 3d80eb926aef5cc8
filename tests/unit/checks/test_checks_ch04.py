"""helpers.checks.ch04: each verdict passes a right answer, fails each mistake with a message naming it, and
leaves no worker process behind. (tests/course/test_exercises.py runs the chapter's grade cells on the submissions.)"""

import gc
import logging
import pickle
import statistics
import sys
import warnings

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from helpers import dataloader as dl
from helpers.checks import CheckFailed, FakeMachine
from helpers.checks import ch04
from helpers.processes import portable

# learner code is written in a notebook, whose functions live in __main__: exec it the same way
LEARNER = '''
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

BASE = 0


def seed_numpy_worker(worker_id):
    info = get_worker_info()
    info.dataset.rng = np.random.default_rng(info.seed + BASE)


def cloned(worker_id):
    pass


def rng_none(worker_id):
    get_worker_info().dataset.rng = np.random.seed(get_worker_info().seed % 2**32)


def by_worker_id(worker_id):
    get_worker_info().dataset.rng = np.random.default_rng(worker_id)


as_lambda = lambda worker_id: seed_numpy_worker(worker_id)


def reads_a_lock(worker_id):
    with LOCK:
        seed_numpy_worker(worker_id)


class Shifted(Dataset):
    def __init__(self, base):
        self.base = base

    def __len__(self):
        return 2

    def __getitem__(self, index):
        return self.base + index


def seeding_from(base):
    def init(worker_id):  # a closure: `base` lives in the call that made it
        get_worker_info().dataset.rng = np.random.default_rng(Shifted(base)[worker_id])
    return init


def loader_for(dataset, device, batch_size, num_workers, seed):
    extra = {"persistent_workers": True, "prefetch_factor": 4} if num_workers else {}
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      pin_memory=torch.device(device).type == "cuda", generator=torch.Generator().manual_seed(seed),
                      **extra)


def pin_always(dataset, device, batch_size, num_workers, seed):
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, pin_memory=True,
                      generator=torch.Generator().manual_seed(seed))
'''


@pytest.fixture(scope="module")
def learner():
    import threading

    namespace = {"__name__": "__main__", "LOCK": threading.Lock()}
    exec(compile(LEARNER, "<learner cell>", "exec"), namespace)
    return namespace


@pytest.fixture(autouse=True)
def no_worker_left():
    yield
    gc.collect()
    assert not dl.worker_processes(), "a check left worker processes behind"


# --------------------------------------------------------------------------- loader_for


def test_loader_checks_pass_the_right_answer(learner):
    fn = learner["loader_for"]
    ch04.check_loader_pinning(fn, FakeMachine(cuda=1), "cuda", expected=True)
    ch04.check_loader_pinning(fn, FakeMachine(cuda=1), "cpu", expected=False)
    ch04.check_loader_workers(fn, 2)
    ch04.check_loader_workers(fn, 0)
    ch04.check_loader_order(fn, n=9, batch_size=3, seeds=(0, 1))


def test_pinning_always_is_named(learner):
    with pytest.raises(CheckFailed, match="pin_memory always on"):
        ch04.check_loader_pinning(learner["pin_always"], FakeMachine(cuda=1), "cpu", expected=False)


def test_every_device_the_task_names_is_graded_right(learner):
    for device in ("cuda", "cuda:1", torch.device("cuda", 1)):
        ch04.check_loader_pinning(learner["loader_for"], FakeMachine(cuda=2), device, expected=True)
    for machine, device in ((FakeMachine(cuda=1), "cpu"), (FakeMachine(mps=True), "mps"),
                            (FakeMachine(cuda=1), torch.device("cpu"))):
        ch04.check_loader_pinning(learner["loader_for"], machine, device, expected=False)


def pin_if(rule):
    def loader_for(dataset, device, batch_size, num_workers, seed):
        return DataLoader(dataset, batch_size=batch_size, pin_memory=rule(device))
    return loader_for


@pytest.mark.parametrize("rule, machine, device, says, not_said", [
    (lambda device: torch.cuda.is_available(), FakeMachine(cuda=1), "cpu", "pin follows the batches' device",
     "always on"),
    (lambda device: torch.device(device).type != "cpu", FakeMachine(mps=True), "mps",
     "MPS does not use pinned memory", "always on"),
    (lambda device: True, FakeMachine(cuda=1), "cpu", "pin_memory always on", "without a GPU the same call"),
])
def test_each_wrong_pin_is_told_what_it_followed(rule, machine, device, says, not_said):
    with pytest.raises(CheckFailed) as failed:
        ch04.check_loader_pinning(pin_if(rule), machine, device, expected=False)
    assert says in str(failed.value) and not_said not in str(failed.value)


def test_a_string_only_device_rule_is_told_about_torch_device():
    with pytest.raises(CheckFailed, match=r"torch.device\(device\).type"):
        ch04.check_loader_pinning(pin_if(lambda device: device.startswith("cuda")), FakeMachine(cuda=1),
                                  torch.device("cuda", 0), expected=True)
    with pytest.raises(CheckFailed, match="any index"):
        ch04.check_loader_pinning(pin_if(lambda device: device == "cuda"), FakeMachine(cuda=2), "cuda:1",
                                  expected=True)


def test_prefetch_factor_without_workers_is_named():
    def prefetch_always(dataset, device, batch_size, num_workers, seed):
        return DataLoader(dataset, num_workers=num_workers, prefetch_factor=4)

    with pytest.raises(CheckFailed, match="prefetch_factor with 0 workers"):
        ch04.check_loader_workers(prefetch_always, 0)


def test_a_loader_that_is_not_a_loader_is_named():
    with pytest.raises(CheckFailed, match="expected a torch.utils.data.DataLoader"):
        ch04.check_loader_workers(lambda *args: [1, 2], 0)


def test_global_seed_is_not_reproducible():
    def global_seed(dataset, device, batch_size, num_workers, seed):
        torch.manual_seed(seed)
        return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers)

    state = torch.get_rng_state()
    with pytest.raises(CheckFailed, match="not reproducible"):
        ch04.check_loader_order(global_seed, n=12, batch_size=4, seeds=(0, 1))
    torch.set_rng_state(state)


# --------------------------------------------------------------------------- pick_num_workers


def reference_pick(measure, counts, margin=0.1, repeats=3):
    medians = {}
    for count in sorted(counts):
        try:
            medians[count] = statistics.median(measure(count) for _ in range(repeats))
        except Exception as err:  # noqa: BLE001
            print(f"num_workers={count} skipped: {type(err).__name__}: {err}")
    if not medians:
        raise RuntimeError("no count could be measured")
    best = max(medians.values())
    return min(c for c, m in medians.items() if m >= (1 - margin) * best)


def test_fake_measure_cycles_raises_and_knows_the_answer():
    died = RuntimeError("worker died")
    measure = ch04.FakeMeasure({0: [1, 2], 2: died, 4: [10]})
    assert [measure(0), measure(0), measure(0)] == [1.0, 2.0, 1.0]
    with pytest.raises(RuntimeError, match="worker died"):
        measure(2)
    with pytest.raises(CheckFailed, match="not one of the candidate counts"):
        measure(3)
    assert measure.calls == {0: 3, 2: 1}
    assert ch04.FakeMeasure({0: [100], 2: [95], 4: [100]}).expected(0.1, 3) == 0
    assert ch04.FakeMeasure({0: [50, 50, 500], 2: [100]}).expected(0.1, 3) == 2


@pytest.mark.parametrize("table, kw", [
    ({0: [100], 1: [150], 2: [290], 4: [300], 8: [310]}, {}),
    ({8: [400], 4: [395], 2: [250], 0: [90]}, {"counts": [8, 4, 2, 0]}),
    ({0: [100, 100, 100], 2: [950, 150, 150], 4: [200, 200, 200]}, {}),
    ({0: [100], 2: [190], 4: OSError(24, "Too many open files"), 8: [200]}, {}),
])
def test_pick_check_passes_the_reference(table, kw):
    ch04.check_pick(reference_pick, table, **kw)


def test_the_most_workers_is_named():
    def most(measure, counts, margin=0.1, repeats=3):
        return max(counts)

    with pytest.raises(CheckFailed, match="not the most workers"):
        ch04.check_pick(most, {0: [100], 2: [290], 8: [300]})


def test_one_measurement_per_count_is_named():
    def once(measure, counts, margin=0.1, repeats=3):
        rates = {c: measure(c) for c in sorted(counts)}
        return min(c for c, r in rates.items() if r >= (1 - margin) * max(rates.values()))

    with pytest.raises(CheckFailed, match="times"):
        ch04.check_pick(once, {0: [100, 100, 100], 2: [950, 150, 150], 4: [200, 200, 200]})


def test_a_crash_on_a_failing_count_is_named():
    def crashes(measure, counts, margin=0.1, repeats=3):
        return min(c for c in counts if measure(c))

    with pytest.raises(CheckFailed, match="measurement fails"):
        ch04.check_pick(crashes, {0: RuntimeError("died"), 2: [100]})


def reporting_pick(report):
    """The reference, telling each skipped count through ``report(count, err)``."""
    def pick_num_workers(measure, counts, margin=0.1, repeats=3):
        medians = {}
        for count in sorted(counts):
            try:
                medians[count] = statistics.median(measure(count) for _ in range(repeats))
            except Exception as err:  # noqa: BLE001
                report(count, err)
        if not medians:
            raise RuntimeError("no count could be measured")
        best = max(medians.values())
        return min(c for c, m in medians.items() if m >= (1 - margin) * best)
    return pick_num_workers


FAILING = {0: [100], 1: ValueError("bad count"), 2: [200], 4: RuntimeError("died"), 8: OSError(24, "Too many open files")}


def test_a_silent_skip_is_named():
    with pytest.raises(CheckFailed, match="printed line"):
        ch04.check_pick(reporting_pick(lambda count, err: None), FAILING)


@pytest.mark.parametrize("report", [
    lambda count, err: print(f"skipping num_workers={count}"),  # which, but not why
    lambda count, err: print(f"a count failed: {err}"),  # why, but not which
])
def test_a_line_must_say_which_count_and_why(report):
    with pytest.raises(CheckFailed, match="names that count and why"):
        ch04.check_pick(reporting_pick(report), FAILING)


def by_named_logger(count, err):
    logger = logging.getLogger("course.test.pick")
    if not logger.handlers:
        logger.addHandler(logging.StreamHandler())  # its own handler, writing to stderr
    logger.warning("count %s failed: %s", count, err)


@pytest.mark.parametrize("report", [
    lambda count, err: print(f"num_workers={count} skipped: {err!r}"),
    lambda count, err: print(f"count {count} failed: {type(err).__name__}", file=sys.stderr),
    lambda count, err: logging.warning("num_workers=%s: %s", count, err),
    by_named_logger,
    lambda count, err: warnings.warn(f"skipping {count}: {err}"),
], ids=["print", "stderr", "logging", "named logger", "warnings"])
def test_a_line_anywhere_counts_and_nothing_reaches_stderr(report, capsys):
    ch04.check_pick(reporting_pick(report), FAILING)
    ch04.check_pick_all_fail(reporting_pick(report), {k: v for k, v in FAILING.items() if isinstance(v, Exception)})
    out, err = capsys.readouterr()
    assert err == "" and "count" in out and "4" in out


def test_an_error_of_the_learners_own_is_shown_as_theirs():
    def own_bug(measure, counts, margin=0.1, repeats=3):
        medians = {}
        for c in counts:
            try:
                medians[c] = statistics.median([measure(c) for _ in range(repeats)])
            except Exception as err:  # noqa: BLE001
                print(f"num_workers={c} skipped: {err}")
        return min(c for c in counts if medians[c] > 0)

    with pytest.raises(CheckFailed) as failed:
        ch04.check_pick(own_bug, {0: [100], 2: RuntimeError("died"), 4: [90]})
    text = str(failed.value)
    assert "KeyError: 2" in text and "own code" in text and "measurement fails" not in text
    assert "medians[c] > 0" in text  # the learner's own line


def test_a_failing_measurement_let_out_is_named():
    def reraises(measure, counts, margin=0.1, repeats=3):
        try:
            return [measure(c) for c in counts]
        except OSError as err:
            raise RuntimeError("gave up") from err

    with pytest.raises(CheckFailed, match="measurement fails"):
        ch04.check_pick(reraises, {0: [100], 4: OSError(24, "Too many open files")})


def test_a_count_exactly_at_the_margin_is_within():
    def strict(measure, counts, margin=0.1, repeats=3):
        medians = {c: statistics.median(measure(c) for _ in range(repeats)) for c in counts}
        best = max(medians.values())
        return min(c for c, m in medians.items() if m > (1 - margin) * best or m == best)

    ch04.check_pick(reference_pick, {0: [100], 2: [180], 4: [200]})
    with pytest.raises(CheckFailed, match=">="):
        ch04.check_pick(strict, {0: [100], 2: [180], 4: [200]})


def test_all_failing_counts_need_a_runtime_error():
    died = RuntimeError("died")
    ch04.check_pick_all_fail(reference_pick, {1: died, 2: died})
    with pytest.raises(CheckFailed, match="expected RuntimeError"):
        ch04.check_pick_all_fail(lambda measure, counts, margin, repeats: None, {1: died})
    with pytest.raises(CheckFailed, match="raised ValueError"):
        ch04.check_pick_all_fail(lambda measure, counts, margin, repeats: max([]), {1: died})


# --------------------------------------------------------------------------- seed_numpy_worker


def test_worker_init_check_passes_the_right_answer_under_fork(learner):
    ch04.check_worker_init(learner["seed_numpy_worker"], "fork", seed=3, other_seed=4)


def test_worker_init_check_passes_a_notebook_function_under_spawn(learner, capsys):
    ch04.check_worker_init(learner["seed_numpy_worker"], "spawn", seed=1)
    assert "no points are lost" in capsys.readouterr().out


def test_an_importable_worker_init_fn_is_sent_as_itself():
    assert ch04._for_spawn(dl.seed_worker) is dl.seed_worker


def test_the_spawn_check_reports_what_spawn_did(learner):
    with pytest.raises(CheckFailed) as failed:
        ch04.check_worker_init(learner["cloned"], "spawn")
    assert "under spawn" in str(failed.value) and "fork" not in str(failed.value)


def test_an_rng_that_is_not_a_generator_is_named(learner):
    with pytest.raises(CheckFailed, match="must be a NumPy Generator") as failed:
        ch04.check_worker_init(learner["rng_none"], "fork")
    assert "NoneType" in str(failed.value) and "AttributeError: AttributeError" not in str(failed.value)


@pytest.mark.parametrize("name, says", [("cloned", "cloned Generator"), ("by_worker_id", "every epoch")])
def test_worker_init_mistakes_are_named(learner, name, says):
    with pytest.raises(CheckFailed, match=says):
        ch04.check_worker_init(learner[name], "fork", seed=0)


def test_a_lambda_loses_the_spawn_point_without_starting_workers(learner):
    with pytest.raises(CheckFailed, match="lambda"):
        ch04.check_worker_init(learner["as_lambda"], "spawn")
    ch04.check_worker_init(learner["as_lambda"], "fork")  # under fork a lambda works


def test_an_unsolved_stub_is_not_written_yet():
    def seed_numpy_worker(worker_id):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="not written yet"):
        ch04.check_worker_init(seed_numpy_worker, "fork")


def test_the_course_version_is_refused_under_both_methods():
    def calls_course(worker_id):
        dl.seed_worker(worker_id)

    for method in ("fork", "spawn"):
        with pytest.raises(CheckFailed, match="write it yourself"):
            ch04.check_worker_init(calls_course, method)
        with pytest.raises(CheckFailed, match="write it yourself"):
            ch04.check_worker_init(dl.seed_worker, method)


def test_a_closure_and_a_notebook_dataset_class_reach_a_spawned_worker(learner):
    """What the spawn check sends (helpers.ddp.portable) carries a notebook closure, and the notebook Dataset class it
    uses, into a spawned worker: the worker draws from the seed they compute there."""
    init = portable(learner["seeding_from"](7))
    loader = DataLoader(dl.ClonedRngDataset(n=2), batch_size=None, num_workers=1, worker_init_fn=init,
                        multiprocessing_context="spawn", timeout=60)
    expected = np.random.default_rng(7)  # Shifted(7)[worker 0]
    assert [item["draw"] for item in loader] == [expected.random(), expected.random()]


def test_by_value_carries_modules_constants_and_helpers(learner):
    carried = pickle.loads(pickle.dumps(ch04._for_spawn(learner["seed_numpy_worker"])))
    assert carried.__name__ == "seed_numpy_worker" and carried.__globals__["BASE"] == 0
    assert carried.__globals__["np"].__name__ == "numpy"
    assert carried.__globals__["get_worker_info"] is torch.utils.data.get_worker_info


def test_by_value_refuses_what_cannot_reach_a_worker(learner):
    with pytest.raises(CheckFailed, match="`LOCK`"):
        ch04._for_spawn(learner["reads_a_lock"])
