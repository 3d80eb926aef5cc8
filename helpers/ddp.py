"""Run N processes that train together (DistributedDataParallel), safely, from anywhere.

Chapter 06 (multi-GPU) teaches it. One process per GPU is how PyTorch trains on
several GPUs; on a machine without GPUs the same code runs with the ``gloo``
backend, one process per CPU core, and shows every idea but the speed.

Starting the processes is :mod:`helpers.processes`' (a function sent by value,
a free port, a bounded run, no process left behind); the chapter calls it as
``ddp.launch``, and its names the chapter uses (:func:`launch`,
:func:`portable`, :func:`free_port`, :class:`Run`, :class:`RankFailed`,
:class:`RunTimedOut`, :class:`PortableError`) are re-exported here for that.
What is about DDP is here: :func:`torchrun` runs a script under
``torch.distributed.run`` the safe way (``timeout -s TERM -k 30``, a log
file, ranks prefixed); :func:`pick_backend` and :func:`comparison_placement`
choose the backend and device; :func:`train` is the course's own DDP training
loop (the chapter times it with 1 and 2 processes).
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import torch

from helpers import device as _device
from helpers.benchmark import Timing, sync_timer
from helpers.i18n import _
from helpers.models import MLP
from helpers.processes import (  # re-exported: chapter 06 launches as ddp.launch (see the module docstring)
    LogTail,
    PortableError,
    RankFailed,
    Run,
    RunTimedOut,
    free_port,
    launch,
    portable,
)

__all__ = [
    "Placement",
    "PortableError",
    "RankFailed",
    "Run",
    "RunTimedOut",
    "Torchrun",
    "comparison_placement",
    "free_port",
    "launch",
    "pick_backend",
    "placement_of",
    "portable",
    "step_timing",
    "torchrun",
    "torchrun_command",
    "train",
]

# --------------------------------------------------------------------------- torchrun


def torchrun_command(script: str | os.PathLike, nproc: int = 2, limit: int = 120, *script_args: str,
                     standalone: bool = True, log_dir: str | os.PathLike | None = None) -> list[str]:
    """The command that runs ``script`` on ``nproc`` processes under torchrun, bounded in time.

    ``timeout -s TERM -k 30 LIMIT``: at the limit torchrun gets SIGTERM, which
    it passes on to its workers ("Received 15 death signal, shutting down
    workers"); SIGKILL would leave the workers running (they live in sessions
    of their own), so SIGKILL comes only 30 s later. ``sys.executable -m
    torch.distributed.run`` because ``torchrun`` is not on a notebook's PATH in
    a venv. ``--standalone``: a rendezvous on a free port of this machine.
    ``--tee 3``: every line prefixed with its rank (``[default0]:``).
    ``log_dir``: where torchrun keeps the workers' logs; without it, it makes
    a ``/tmp/torchelastic_*`` folder per run and never removes it.
    """
    cmd = [sys.executable, "-m", "torch.distributed.run"]
    cmd += ["--standalone"] if standalone else []
    cmd += ["--log-dir", str(log_dir)] if log_dir is not None else []
    cmd += [f"--nproc_per_node={int(nproc)}", "--tee", "3", str(script), *map(str, script_args)]
    if shutil.which("timeout"):
        cmd = ["timeout", "-s", "TERM", "-k", "30", str(int(limit)), *cmd]
    return cmd


@dataclass
class Torchrun:
    """What :func:`torchrun` saw: the exit code and everything printed."""

    returncode: int
    output: str
    seconds: float
    command: list[str] = field(default_factory=list)

    @property
    def timed_out(self) -> bool:
        return self.returncode in (124, 137, -signal.SIGTERM, -signal.SIGKILL)


def torchrun(script: str | os.PathLike, nproc: int = 2, limit: int = 120, *script_args: str,
             env: dict[str, str] | None = None, echo: bool = True) -> Torchrun:
    """Run ``script`` under torchrun (see :func:`torchrun_command`), streaming its output as it comes.

    Output goes to a log file, never a pipe: a worker that outlives torchrun
    would hold a pipe open and a reader would wait for ever. torchrun's own
    log folder goes inside the same temporary folder, removed at the end.
    """
    clock = sync_timer("cpu")
    start = clock()
    with tempfile.TemporaryDirectory(prefix="torchrun-") as tmp:
        cmd = torchrun_command(script, nproc, limit, *script_args, log_dir=Path(tmp) / "logs")
        log_path = Path(tmp) / "torchrun.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"})
        reader = LogTail(log_path)
        deadline = time.monotonic() + limit + 35
        try:
            while proc.poll() is None and time.monotonic() < deadline:
                if echo:
                    print(reader.new_output(), end="", flush=True)
                time.sleep(0.05)
        finally:
            if proc.poll() is None:  # `timeout` missing or stuck: the same TERM, then KILL, by hand
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        if echo:
            print(reader.new_output() + reader.partial, end="", flush=True)
        return Torchrun(proc.returncode, log_path.read_text("utf-8", "replace"), clock() - start, cmd)


# --------------------------------------------------------------------------- the course's DDP training loop


def pick_backend(rank: int, world_size: int, device_type: str | None = None) -> tuple[str, torch.device]:
    """``("nccl", cuda:LOCAL_RANK)`` when this machine has a GPU for every local rank, else ``("gloo", cpu)``.

    ``rank`` counts the processes of all machines; the GPU is picked by the
    *local* rank, this process's number on its own machine (torchrun and
    :func:`launch` set ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE``; without them,
    one machine is assumed: the local rank is the rank). The backend is
    torch's default for the device
    (``torch.distributed.get_default_backend_for_device``): NCCL moves CUDA
    tensors between GPUs and refuses two ranks on one GPU; gloo runs on CPUs
    everywhere (and is what the course uses without GPUs). ``device_type``
    ("cpu" or "cuda") imposes the device instead, as a comparison of several
    runs must (:func:`comparison_placement`); "cuda" without a GPU for every
    local rank raises.
    """
    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
    gpus = [d for d in _device.available_devices() if d.type == "cuda"]
    if device_type not in (None, "cpu", "cuda"):
        raise ValueError(_("device_type must be 'cpu', 'cuda' or None (chosen here), not {device_type!r}").format(
            device_type=device_type))
    if device_type == "cuda" and len(gpus) < local_world:
        raise RuntimeError(_("NCCL needs a GPU of its own for every process: {processes} process(es) on this "
                             "machine, {gpus} GPU(s). Run on the CPU (device_type='cpu', gloo) instead.").format(
                               processes=local_world, gpus=len(gpus)))
    on_gpu = device_type == "cuda" or (device_type is None and len(gpus) >= local_world)
    dev = torch.device("cuda", local_rank) if on_gpu else torch.device("cpu")
    return dist.get_default_backend_for_device(dev), dev


@dataclass(frozen=True)
class Placement:
    """Where every run of a comparison goes: one backend on one kind of device, and why."""

    backend: str  #: "nccl" or "gloo"
    device_type: str  #: "cuda" or "cpu"
    reason: str


def comparison_placement(max_processes: int) -> Placement:
    """One backend and device for every run of a comparison of 1 up to ``max_processes`` processes.

    Like must be compared with like, so the choice is made once, for the
    largest run, and every run (the 1-process one too) is given it through
    ``train(device_type=...)``. NCCL needs a GPU of its own for every process
    (it refuses two ranks on one GPU), so it serves only when this machine
    has ``max_processes`` GPUs and a torch built with NCCL; otherwise every
    run is gloo on the CPU. Choosing per run instead (what
    :func:`pick_backend` does alone) would time, on one GPU, 1 process on
    NCCL/GPU against 2 on gloo/CPU.
    """
    import torch.distributed as dist

    gpus = sum(d.type == "cuda" for d in _device.available_devices())
    if gpus >= max_processes and dist.is_nccl_available():
        return Placement("nccl", "cuda", _("{gpus} GPUs: one for each of up to {processes} processes, as NCCL "
                                           "needs").format(gpus=gpus, processes=max_processes))
    if gpus >= max_processes:
        why = _("{gpus} GPUs, but this torch has no NCCL").format(gpus=gpus)
    elif gpus:
        why = _("{gpus} GPU(s) for up to {processes} processes, and NCCL needs a GPU of its own for each: every run "
                "on the CPU, the 1-process one too, so that like is compared with like").format(
                    gpus=gpus, processes=max_processes)
    else:
        why = _("no GPU here")
    return Placement("gloo", "cpu", why)


def placement_of(results: Sequence[dict]) -> str:
    """What a run of :func:`train` really used, from every rank's result: e.g. ``"gloo on cpu"``, ``"nccl on cuda:0, cuda:1"``."""
    backends = sorted({r["backend"] for r in results})
    devices = sorted({r["device"] for r in results})
    return _("{backends} on {devices}").format(backends="/".join(backends), devices=", ".join(devices))


def _setup(rank: int, world_size: int, seconds: float = 60.0, device_type: str | None = None) -> torch.device:
    """Join the process group on this rank's device (a GPU is made current first, and named to NCCL)."""
    import torch.distributed as dist

    backend, dev = pick_backend(rank, world_size, device_type)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)  # kernels and NCCL's buffers of this process go to its own GPU
    dist.init_process_group(backend, rank=rank, world_size=world_size, timeout=timedelta(seconds=seconds),
                            device_id=dev if dev.type == "cuda" else None)
    return dev


def train(rank: int, world_size: int, x: torch.Tensor, y: torch.Tensor, checkpoint: str | None = None,
          epochs: int = 2, batch_size: int = 4, lr: float = 0.05, seed: int = 0, hidden: int = 16,
          device_type: str | None = None) -> dict:
    """The course's DDP training loop, run on every rank (through :func:`launch` or torchrun).

    Process group; the model built after ``torch.manual_seed(seed)``, moved to
    its device, then wrapped (DDP broadcasts rank 0's weights); a
    ``DistributedSampler`` (each rank its share, reshuffled every epoch by
    ``set_epoch``); SGD on the mean squared error; a checkpoint written by rank 0
    only, a barrier, and every rank reading it back with ``map_location``.
    Chapter 06 writes the same loop as an exercise, and times this one.
    ``device_type`` imposes the device (see :func:`pick_backend`); a
    comparison of runs passes :func:`comparison_placement`'s.

    Returns (on the CPU) ``weights`` (this rank's, trained), ``resumed`` (read
    back from ``checkpoint``, or None), ``steps``, ``step_seconds`` (every
    step's time, batch loading included: the repeats :func:`step_timing` turns
    into a measurement to compare), ``seconds_per_step`` (their median: the
    first steps pay for allocation), ``threads`` (this rank's torch threads)
    and ``allreduce_seconds``: one all-reduce of as many values as the model
    has parameters, the communication of one step without the overlap. All
    timed with :func:`helpers.benchmark.sync_timer`. ``backend`` and ``device``
    say what this rank really used (:func:`placement_of` joins the ranks').
    """
    sys.audit("course.version", "helpers.ddp:train")  # the grader: no exercise passes by calling this
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    dev = _setup(rank, world_size, device_type=device_type)
    try:
        torch.manual_seed(seed)
        model = MLP(x.shape[1], hidden, y.shape[1], depth=1).to(dev)
        ddp_model = DDP(model, device_ids=[dev.index] if dev.type == "cuda" else None)
        dataset = TensorDataset(x, y)
        sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed)
        loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler)
        optimizer = torch.optim.SGD(ddp_model.parameters(), lr=lr)
        clock, times = sync_timer(dev), []
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            start = clock()
            for xb, yb in loader:
                optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(ddp_model(xb.to(dev)), yb.to(dev))
                loss.backward()  # DDP all-reduces the gradients here, bucket by bucket
                optimizer.step()
                times.append(clock() - start)  # batch loading included, as in real training
                start = clock()
        weights = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
        resumed = _checkpoint(model, checkpoint, rank, dev) if checkpoint is not None else None
        seconds = statistics.median(times) if times else float("nan")  # robust to the first, slow steps
        return {"weights": weights, "resumed": resumed, "steps": len(times), "seconds_per_step": seconds,
                "step_seconds": times, "threads": torch.get_num_threads(),
                "allreduce_seconds": _allreduce_seconds(model, dev), "backend": dist.get_backend(), "device": str(dev)}
    finally:
        dist.destroy_process_group()


def step_timing(results: Sequence[dict], label: str = "", warmup: int = 2) -> Timing:
    """Seconds per training step of one run of :func:`train` (every rank's result), one repeat per step.

    What :func:`helpers.benchmark.compare` judges, so that "2 processes were
    faster" is said only beyond the noise. A step of several ranks ends when
    the slowest is done (the all-reduce waits for it): each step counts at its
    slowest rank's time. The first ``warmup`` steps (allocation, DDP's first
    buckets) are left out. ``num_threads`` is the ranks' threads together,
    the figure a fair comparison holds equal: one process with 2 threads
    against 2 processes with 1 each uses the same cores. ``device`` is the
    devices the ranks report (``"cpu"``, ``"cuda:0, cuda:1"``).
    """
    per_rank = [r["step_seconds"][warmup:] for r in results]
    steps = [max(times) for times in zip(*per_rank)]
    if not steps:
        raise ValueError(_("no step left to time after {warmup} warm-up steps: train more steps or epochs").format(
            warmup=warmup))
    used = sorted({r["device"] for r in results if "device" in r})  # what train() says it ran on
    return Timing.from_times(steps, device=", ".join(used) or "cpu", label=label,
                             num_threads=sum(r["threads"] for r in results))


def _checkpoint(model: torch.nn.Module, path: str, rank: int, dev: torch.device) -> dict[str, torch.Tensor]:
    """Rank 0 writes, everyone waits, everyone reads back onto its own device."""
    import torch.distributed as dist

    if rank == 0:
        torch.save(model.state_dict(), path)  # the inner module: no "module." in the keys
    dist.barrier()  # nobody reads before rank 0 has written
    where = {"cuda:0": str(dev)} if dev.type == "cuda" else "cpu"
    state = torch.load(path, map_location=where, weights_only=True)
    return {k: v.cpu() for k, v in state.items()}


def _allreduce_seconds(model: torch.nn.Module, dev: torch.device, repeats: int = 10) -> float:
    import torch.distributed as dist

    grads = torch.zeros(sum(p.numel() for p in model.parameters()), device=dev)
    clock = sync_timer(dev)
    dist.all_reduce(grads)  # warm-up
    start = clock()
    for _ in range(repeats):
        dist.all_reduce(grads)
    return (clock() - start) / repeats
