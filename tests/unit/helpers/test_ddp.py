"""helpers.ddp: N processes from a notebook, a grader or pytest: a free port each run, a bounded time, every
process reaped, a crash that names its rank; portable() sends by value (cloudpickle) what has no importable name.

Every test that starts processes checks that none is left behind (course.no_child_left). No test uses a fixed
port, so two runs of this file at once do not collide.
"""

import multiprocessing
import os
import pickle
import signal
import socket
import sys
import textwrap
import threading
import time

import pytest
import torch

from support.layout import no_child_left
from helpers import ddp
from helpers.checks import fake_machine
from helpers.checks.ch06 import reference_weights
from helpers.models import make_regression


@pytest.fixture
def no_leftovers():
    """After the test, this process has no child (nor grandchild) left that the test started."""
    with no_child_left():
        yield


def cell(source: str) -> dict:
    """Run ``source`` the way tests/course/test_exercises.py runs a notebook cell: exec'd, no source file."""
    namespace = {"__name__": "__main__"}
    exec(compile(textwrap.dedent(source), "<cell>", "exec"), namespace)
    return namespace


# a notebook function (`work`) that reads a closure (`helper`) and a Dataset class defined in the notebook (`Ranks`):
# a rank computes (1 + 2) * 10 only if all three reached it
ALL_REDUCE = cell("""
    import os
    import torch
    import torch.distributed as dist
    from torch.utils.data import Dataset

    class Ranks(Dataset):
        def __init__(self, world_size):
            self.world_size = world_size

        def __len__(self):
            return self.world_size

        def __getitem__(self, rank):
            return torch.tensor([float(rank + 1)])

    def times(scale):
        def helper(t):
            return t * scale
        return helper

    helper = times(torch.tensor([10.0]))

    def work(rank, world_size, offset=0.0):
        dist.init_process_group("gloo")  # env:// from what launch set
        t = Ranks(world_size)[rank]
        dist.all_reduce(t)
        print(f"hello from {rank}")
        env = {k: os.environ[k] for k in ("RANK", "WORLD_SIZE", "MASTER_PORT", "OMP_NUM_THREADS")}
        dist.destroy_process_group()
        return helper(t) + offset, env
""")


def test_free_port_is_free_and_bindable():
    port = ddp.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
    assert 1024 <= port <= 65535


def test_portable_sends_an_execd_closure_by_value_without_its_source():
    rebuilt = pickle.loads(pickle.dumps(ddp.portable(ALL_REDUCE["helper"])))
    assert rebuilt is not ALL_REDUCE["helper"] and rebuilt.__closure__  # a copy, its enclosing `scale` with it
    assert rebuilt(torch.ones(1)).item() == 10.0  # rebuilt here, called here
    assert pickle.loads(ddp.portable(ddp.train).payload) is ddp.train  # an importable function goes by name


def test_portable_fingerprint_follows_the_code():
    a = cell("def f(rank, world_size):\n    return 1\n")["f"]
    b = cell("def f(rank, world_size):\n    return 2\n")["f"]
    assert ddp.portable(a).fingerprint == ddp.portable(a).fingerprint != ddp.portable(b).fingerprint


@pytest.mark.parametrize("source, words", [
    ("import threading\nlock = threading.Lock()\ndef f(rank, world_size):\n    return lock\n", "global `lock`"),
    ("import threading\ndef outer():\n    k = threading.Lock()\n    def f(rank, world_size):\n        return k\n"
     "    return f\nf = outer()\n", "enclosing variable `k`"),
])
def test_portable_refuses_what_a_child_cannot_rebuild(source, words):
    with pytest.raises(ddp.PortableError, match=words):
        ddp.portable(cell(source)["f"])


def test_launch_runs_every_rank_and_streams_output_with_its_rank(capsys, no_leftovers):
    """Also the proof that a notebook function, a closure and a notebook Dataset class reach a rank (ALL_REDUCE)."""
    run = ddp.launch(ALL_REDUCE["work"], 2, kwargs={"offset": 0.5}, timeout=90)
    values = [value.item() for value, _ in run.results]
    envs = [env for _, env in run.results]
    assert values == [30.5, 30.5]  # (1 + 2) * 10 + 0.5 on both ranks
    assert [e["RANK"] for e in envs] == ["0", "1"] and {e["WORLD_SIZE"] for e in envs} == {"2"}
    assert {e["MASTER_PORT"] for e in envs} == {str(run.port)}
    assert {e["OMP_NUM_THREADS"] for e in envs} == {str(max(1, (os.cpu_count() or 1) // 2))}
    out = capsys.readouterr()
    assert "[rank0] hello from 0" in out.out and "[rank1] hello from 1" in out.out
    assert "hello" not in out.err  # a rank's output never reaches this process's stderr


def test_a_rank_that_raises_is_named_and_the_others_are_stopped(no_leftovers):
    ns = cell("""
        import time
        import torch.distributed as dist
        def f(rank, world_size):
            dist.init_process_group("gloo")
            if rank == 1:
                raise ValueError("bad batch on rank 1")
            time.sleep(60)  # would hold the run for a minute if nobody stopped it
    """)
    start = time.monotonic()
    with pytest.raises(ddp.RankFailed, match="rank 1 failed: ValueError: bad batch on rank 1") as info:
        ddp.launch(ns["f"], 2, timeout=90, echo=False)
    assert info.value.rank == 1 and info.value.error == "ValueError"
    assert "were stopped" in str(info.value) and time.monotonic() - start < 45


def test_a_hang_ends_at_its_limit_and_takes_its_children_with_it(no_leftovers):
    ns = cell("""
        import subprocess, sys
        def f(rank, world_size):
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # a grandchild
            while True:
                pass
    """)
    start = time.monotonic()
    with pytest.raises(ddp.RunTimedOut, match=r"did not finish within 6 s: rank\(s\) \[0, 1\]") as info:
        ddp.launch(ns["f"], 2, timeout=6, echo=False)
    assert info.value.running == [0, 1] and time.monotonic() - start < 20


def test_a_rank_killed_from_outside_is_reported(no_leftovers):
    ns = cell("""
        import os, signal, time
        def f(rank, world_size):
            if rank == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(60)
    """)
    with pytest.raises(ddp.RankFailed, match="rank 1 died .killed by signal SIGKILL"):
        ddp.launch(ns["f"], 2, timeout=90, echo=False)


def test_an_interrupt_while_waiting_stops_every_rank(no_leftovers):
    """Ctrl-C while the ranks run stops them all. The interrupt is sent again every 2 s until it is seen, as a
    person presses Ctrl-C again."""
    ns = cell("import time\ndef f(rank, world_size):\n    time.sleep(60)\n")
    seen = threading.Event()

    def interrupt():
        if not seen.wait(4.0):
            while not seen.is_set():
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
                seen.wait(2.0)

    presser = threading.Thread(target=interrupt, daemon=True)
    # a pytest-xdist worker runs with SIGINT ignored; here Ctrl-C must raise, as in a notebook
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    presser.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            ddp.launch(ns["f"], 2, timeout=90, echo=False)
    finally:
        seen.set()
        presser.join()
        signal.signal(signal.SIGINT, handler)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_works_whatever_start_method_multiprocessing_is_set_to(method, no_leftovers):
    saved = multiprocessing.get_start_method(allow_none=True)
    multiprocessing.set_start_method(method, force=True)
    try:
        run = ddp.launch(cell("def f(rank, world_size):\n    return rank * 7\n")["f"], 2, timeout=90, echo=False)
    finally:
        multiprocessing.set_start_method(saved, force=True)
    assert run.results == [0, 7]


def test_two_runs_at_once_use_different_ports(no_leftovers):
    runs = {}
    f = ALL_REDUCE["work"]
    threads = [threading.Thread(target=lambda i=i: runs.__setitem__(i, ddp.launch(f, 2, timeout=120, echo=False)))
               for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert runs[0].port != runs[1].port
    assert all(value.item() == 30.0 for run in runs.values() for value, _ in run.results)


@pytest.mark.parametrize("kwargs, words", [
    ({"world_size": 0}, "world_size"), ({"world_size": 2, "timeout": 0}, "timeout"),
])
def test_bad_arguments_are_refused_before_anything_starts(kwargs, words):
    with pytest.raises(ValueError, match=words):
        ddp.launch(ALL_REDUCE["work"], **kwargs)
    with pytest.raises(TypeError, match="function"):
        ddp.launch("not a function")


def test_pick_backend_takes_nccl_only_with_a_gpu_per_rank():
    assert ddp.pick_backend(1, 2) == ("gloo", torch.device("cpu"))
    with fake_machine(cuda=2):
        assert ddp.pick_backend(1, 2) == ("nccl", torch.device("cuda", 1))
    with fake_machine(cuda=1):
        assert ddp.pick_backend(0, 2) == ("gloo", torch.device("cpu"))


def test_pick_backend_picks_the_gpu_by_local_rank(monkeypatch):
    """Rank 3 of 4 on two machines of 2 GPUs is local rank 1: cuda:1, not cuda:3 (which does not exist)."""
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    with fake_machine(cuda=2):
        assert ddp.pick_backend(3, 4) == ("nccl", torch.device("cuda", 1))
    assert ddp.pick_backend(3, 4) == ("gloo", torch.device("cpu"))


def test_pick_backend_takes_the_device_it_is_given(monkeypatch):
    """A comparison imposes one device on every run: the CPU even with GPUs, CUDA only with a GPU per process."""
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    with fake_machine(cuda=2):
        assert ddp.pick_backend(1, 2, "cpu") == ("gloo", torch.device("cpu"))
        assert ddp.pick_backend(1, 2, "cuda") == ("nccl", torch.device("cuda", 1))
    with fake_machine(cuda=1):
        assert ddp.pick_backend(0, 1, "cuda") == ("nccl", torch.device("cuda", 0))
        with pytest.raises(RuntimeError, match="a GPU of its own for every process"):
            ddp.pick_backend(0, 2, "cuda")
    with pytest.raises(ValueError, match="device_type"):
        ddp.pick_backend(0, 1, "gpu")


@pytest.mark.parametrize("gpus, nccl, placement, words", [
    (0, True, ("gloo", "cpu"), "no GPU"),
    (1, True, ("gloo", "cpu"), "like is compared with like"),
    (2, True, ("nccl", "cuda"), "one for each"),
    (2, False, ("gloo", "cpu"), "no NCCL"),
])
def test_a_comparison_runs_every_process_count_on_one_placement(monkeypatch, gpus, nccl, placement, words):
    """On one GPU, 1 and 2 processes both run gloo on the CPU: never 1 on NCCL/GPU against 2 on gloo/CPU."""
    import torch.distributed as dist

    monkeypatch.setattr(dist, "is_nccl_available", lambda: nccl)
    with fake_machine(cuda=gpus):
        chosen = ddp.comparison_placement(2)
        assert (chosen.backend, chosen.device_type) == placement and words in chosen.reason
        for processes in (1, 2):  # every run of the comparison, given the same device
            for rank in range(processes):
                monkeypatch.setenv("LOCAL_RANK", str(rank))
                monkeypatch.setenv("LOCAL_WORLD_SIZE", str(processes))
                backend, dev = ddp.pick_backend(rank, processes, chosen.device_type)
                assert (backend, dev.type) == placement


def test_placement_of_names_what_the_ranks_used():
    assert ddp.placement_of([{"backend": "gloo", "device": "cpu"}] * 2) == "gloo on cpu"
    assert ddp.placement_of([{"backend": "nccl", "device": "cuda:1"}, {"backend": "nccl", "device": "cuda:0"}]) == (
        "nccl on cuda:0, cuda:1")


def test_train_on_two_ranks_equals_one_process_on_the_same_batches(tmp_path, no_leftovers):
    x, y = make_regression(12, 5, seed=4)
    run = ddp.launch(ddp.train, 2, args=(x, y, str(tmp_path / "ckpt.pt")), kwargs=dict(epochs=3, batch_size=2, lr=0.1),
                     timeout=120, echo=False)
    expected = reference_weights(x, y, world_size=2, epochs=3, batch_size=2, lr=0.1, seed=0)
    for result in run.results:
        assert result["steps"] == 9 and result["allreduce_seconds"] > 0
        assert len(result["step_seconds"]) == 9 and result["threads"] >= 1
        assert (result["backend"], result["device"]) == ("gloo", "cpu")  # what it really used
        for key, value in expected.items():
            torch.testing.assert_close(result["weights"][key], value, rtol=1e-4, atol=1e-5)
            assert torch.equal(result["resumed"][key], run.results[0]["weights"][key])


def test_step_timing_counts_each_step_at_its_slowest_rank_after_warm_up():
    """What compare() judges: one repeat per step, the ranks' threads together (like with like)."""
    ranks = [{"step_seconds": [0.9, 0.10, 0.30, 0.10, 0.2], "threads": 1},
             {"step_seconds": [0.8, 0.20, 0.10, 0.10, 0.1], "threads": 1}]
    timing = ddp.step_timing(ranks, "2 processes", warmup=1)
    assert timing.times == [0.20, 0.30, 0.10, 0.2] and timing.num_threads == 2 and timing.label == "2 processes"
    assert timing.median == pytest.approx(0.2)
    assert ddp.step_timing([{**r, "device": f"cuda:{i}"} for i, r in enumerate(ranks)], warmup=1).device == (
        "cuda:0, cuda:1")
    with pytest.raises(ValueError, match="no step left"):
        ddp.step_timing(ranks, warmup=5)


def test_torchrun_command_is_bounded_and_standalone():
    cmd = ddp.torchrun_command("s.py", 2, 50)
    assert cmd[:6] == ["timeout", "-s", "TERM", "-k", "30", "50"]
    assert cmd[6:9] == [sys.executable, "-m", "torch.distributed.run"]
    assert "--standalone" in cmd and "--nproc_per_node=2" in cmd and cmd[-1] == "s.py"


def test_torchrun_prefixes_every_line_with_its_rank(tmp_path, capsys, no_leftovers):
    script = tmp_path / "hello.py"
    script.write_text("import os\nprint('rank', os.environ['RANK'], flush=True)\n")
    result = ddp.torchrun(script, 2, 60, env={"OMP_NUM_THREADS": "1"})
    assert result.returncode == 0 and not result.timed_out
    assert "[default0]:rank 0" in result.output and "[default1]:rank 1" in result.output
    assert "[default1]:rank 1" in capsys.readouterr().out


def test_torchrun_leaves_no_log_folder_behind(tmp_path, no_leftovers):
    """torchrun makes a torchelastic_* folder in the temporary directory per run unless told --log-dir."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    script = tmp_path / "hello.py"
    script.write_text("print('hello', flush=True)\n")
    result = ddp.torchrun(script, 2, 60, env={"OMP_NUM_THREADS": "1", "TMPDIR": str(scratch)}, echo=False)
    assert result.returncode == 0 and "--log-dir" in result.command
    assert list(scratch.iterdir()) == []
