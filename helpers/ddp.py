"""Run N processes that train together (DistributedDataParallel), safely, from anywhere.

Chapter 06 (multi-GPU) teaches it. One process per GPU is how PyTorch trains on
several GPUs; on a machine without GPUs the same code runs with the ``gloo``
backend, one process per CPU core, and shows every idea but the speed.

Starting processes from a notebook, from nbgrader's kernel or from pytest has
traps, and :func:`launch` closes each of them:

* **the child must find the function.** ``pickle`` sends a function by name
  (``__main__.train``), and a fresh interpreter has no notebook, so
  ``torch.multiprocessing.spawn`` fails with ``Can't get attribute 'train' on
  <module '__main__'>``. :func:`launch` pickles with ``cloudpickle`` instead
  (see :func:`portable`), which sends such a function *by value*: its code,
  its closure and the globals it reads (``torch`` by name, re-imported; a
  tensor, another notebook function or a notebook class by value), so a
  function defined in a notebook cell, or exec'd by a grader, runs in the
  child as it would in the cell;
* **two runs must not share a port**: each run gets a free one
  (:func:`free_port` binds to port 0 and lets the system choose);
* **every run ends**: a rank that raises stops the others (as torchrun does)
  and :class:`RankFailed` names the rank and its error; a run that hangs (a
  rank waiting for a collective another rank never calls) is stopped at its
  limit with :class:`RunTimedOut`;
* **no process is left behind**: each rank leads its own process group, which
  is sent SIGTERM, then SIGKILL, and reaped, on success, failure, timeout or
  an interrupt;
* **output stays readable**: each rank writes to its own log, streamed with
  its rank in front of every line, never to the kernel's stderr.

:func:`torchrun` runs a script under ``torch.distributed.run`` the safe way
(``timeout -s TERM -k 30``, a log file, ranks prefixed). :func:`train` is the
course's own DDP training loop (the chapter times it with 1 and 2 processes).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import cloudpickle
import torch

from helpers import device as _device
from helpers.benchmark import Timing, sync_timer
from helpers.i18n import _, current
from helpers.models import MLP

__all__ = [
    "Placement",
    "Portable",
    "PortableError",
    "RankFailed",
    "Run",
    "RunTimedOut",
    "Torchrun",
    "free_port",
    "comparison_placement",
    "launch",
    "pick_backend",
    "placement_of",
    "portable",
    "step_timing",
    "torchrun",
    "torchrun_command",
    "train",
]

# --------------------------------------------------------------------------- sending a function


class PortableError(TypeError):
    """A function cannot be sent to another process; the message says which name is the problem and why."""


class Portable:
    """A function pickled once, by value where needed, for another process (see :func:`portable`).

    Unpickled (in a rank, in a DataLoader worker) it is the function itself,
    so the child runs the learner's code, not a wrapper; called here, it
    calls the function.
    """

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.payload = _dumps(fn)

    @property
    def fingerprint(self) -> str:
        """A digest of what is sent (code, closure, globals): equal for the same function, different after an edit."""
        return hashlib.sha256(self.payload).hexdigest()[:16]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __reduce__(self) -> tuple:
        return (cloudpickle.loads, (self.payload,))

    def __repr__(self) -> str:
        return f"<portable function {getattr(self.fn, '__qualname__', self.fn)} ({len(self.payload)} bytes)>"


def portable(fn: Callable[..., Any]) -> Portable:
    """Package ``fn`` (defined in a notebook, a script or exec'd code) so a child process can run it.

    ``pickle`` sends a function by name, which a fresh interpreter cannot
    look up when the function lives in a notebook (``__main__``) or inside
    another function. ``cloudpickle`` (what Ray, Dask and joblib use) sends
    such a function by value: its code, its closure and the globals it reads
    (a module or an importable object by name; a notebook function, class or
    tensor by value). No source file is needed, so code a grader exec'd
    travels too. What cannot be pickled (an open file, a lock) is refused
    here, before any process starts, with the name that holds it.
    """
    return fn if isinstance(fn, Portable) else Portable(fn)


def _dumps(fn: Callable[..., Any]) -> bytes:
    try:
        return cloudpickle.dumps(fn)
    except Exception as err:  # noqa: BLE001 - what cannot be pickled is named in the message
        raise PortableError(_why_not(fn, err)) from None


def _why_not(fn: Callable[..., Any], err: Exception) -> str:
    """Name what ``fn`` holds that cannot be pickled: cloudpickle's own error names only its type."""
    name = getattr(fn, "__name__", type(fn).__name__)
    try:
        seen = inspect.getclosurevars(fn)
    except TypeError:  # not a Python function: no names to look into
        return _("`{name}` cannot be sent to another process ({err}).").format(name=name, err=err)
    for kind, values in ((_("global"), seen.globals), (_("enclosing variable"), seen.nonlocals)):
        for var, value in values.items():
            if not _picklable(value):
                return _("`{name}` uses the {kind} `{var}` (a {type}), which cannot be sent to another process "
                         "({err}). Create it inside `{name}`.").format(name=name, kind=kind, var=var,
                                                                         type=type(value).__name__, err=err)
    return _("`{name}` cannot be sent to another process ({err}).").format(name=name, err=err)


def _picklable(value: Any) -> bool:
    try:
        cloudpickle.dumps(value)
    except Exception:  # noqa: BLE001 - any failure is a no
        return False
    return True


# --------------------------------------------------------------------------- errors and results


def free_port() -> int:
    """A TCP port nobody is listening on now: the system picks one when asked to bind to port 0."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Run:
    """What a finished :func:`launch` gives back: each rank's return value and output."""

    results: list[Any]  #: the return value of each rank, by rank
    logs: list[str]  #: everything each rank printed (stdout and stderr), by rank
    seconds: float  #: wall time of the run, start-up included
    port: int  #: the port rank 0 listened on


class RankFailed(RuntimeError):
    """A rank raised (or died); the message names the rank, the error and the end of its traceback."""

    def __init__(self, message: str, rank: int, error: str, detail: str, logs: list[str]) -> None:
        super().__init__(message)
        self.rank, self.error, self.detail, self.logs = rank, error, detail, logs


class RunTimedOut(TimeoutError):
    """The run did not finish within its limit; every rank was stopped."""

    def __init__(self, message: str, running: list[int], logs: list[str]) -> None:
        super().__init__(message)
        self.running, self.logs = running, logs


_SECONDARY = ("Connection closed by peer", "Connection reset by peer", "Broken pipe", "stopped by the launcher")


def _tail(text: str, lines: int = 8) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join("    " + line for line in kept[-lines:])


# --------------------------------------------------------------------------- the child side


def _run_rank(work: Path, rank: int) -> int:
    """Body of every rank: rebuild the job, run it, leave the result (or the error) in ``work``."""
    job = cloudpickle.loads((work / "job.pkl").read_bytes())
    os.environ.update(job["env"][rank])
    torch.set_num_threads(job["threads"])
    try:
        fn = job["fn"]
        result = fn(rank, job["world_size"], *job["args"], **job["kwargs"])
        torch.save(result, work / f"result{rank}.pt")
        return 0
    except BaseException as err:  # noqa: BLE001 - every failure is reported to the parent, SystemExit too
        record = {"rank": rank, "error": type(err).__name__, "message": str(err), "time": time.time(),
                  "traceback": _user_traceback(err)}
        (work / f"error{rank}.json").write_text(json.dumps(record))
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _user_traceback(err: BaseException) -> str:
    """The traceback without this module's own frames: the learner's code and torch's."""
    frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename != __file__]
    return "".join(traceback.format_list(frames) + traceback.format_exception_only(type(err), err))


def _spawned_child() -> None:
    """Entry point of a spawned rank: ``python -c '...' WORK RANK``.

    Ends with ``os._exit`` once the result (or error) is written and the output flushed: the
    interpreter's own teardown can abort in gloo's C++ destructors ("terminate called without an
    active exception", seen on a loaded 2-core machine), which would turn a finished rank into a
    crash.
    """
    code = _run_rank(Path(sys.argv[1]), int(sys.argv[2]))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


# --------------------------------------------------------------------------- the parent side


class _LogTail:
    """Reads what a process appended to its log since the last read, line by line."""

    def __init__(self, path: Path) -> None:
        self.log, self.offset, self.partial = path, 0, ""

    def new_output(self) -> str:
        """Complete lines written since the last call."""
        with open(self.log, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        self.offset += len(data)
        text = self.partial + data.decode("utf-8", "replace")
        lines, _, self.partial = text.rpartition("\n")
        return lines + "\n" if lines else ""

    def text(self) -> str:
        return self.log.read_text("utf-8", "replace") if self.log.exists() else ""


class _Rank(_LogTail):
    """One started rank: its process, its log, and how to stop its whole process group."""

    def __init__(self, rank: int, work: Path, env: dict[str, str]) -> None:
        super().__init__(work / f"rank{rank}.log")
        self.rank = rank
        boot = "import sys; from helpers.ddp import _spawned_child; _spawned_child()"
        with open(self.log, "wb") as out:  # from its first byte, the rank's output goes to its log
            self.proc = subprocess.Popen(
                [sys.executable, "-c", boot, str(work), str(rank)], stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, env={**os.environ, **env, "PYTHONUNBUFFERED": "1"},
                start_new_session=True)  # its own process group: stopping it stops its children too
        self.pid = self.proc.pid

    def exitcode(self) -> int | None:
        return self.proc.poll()

    def signal(self, sig: int) -> None:
        """Signal the rank's process group: the rank and anything it started (DataLoader workers)."""
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def reap(self, timeout: float) -> None:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass



def _stop(ranks: list[_Rank], grace: float = 3.0) -> None:
    """SIGTERM every rank's group, SIGKILL what is left after ``grace`` s, reap them all."""
    for r in ranks:
        if r.exitcode() is None:
            r.signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(r.exitcode() is None for r in ranks) and time.monotonic() < deadline:
        time.sleep(0.02)
    for r in ranks:
        r.signal(signal.SIGKILL)  # also sweeps grandchildren left in the group (DataLoader workers)
    for r in ranks:
        r.reap(5.0)


def _echo(ranks: list[_Rank], final: bool = False) -> None:
    for r in ranks:
        text = r.new_output()
        if final and r.partial:
            text, r.partial = text + r.partial + "\n", ""
        for line in text.splitlines():
            print(f"[rank{r.rank}] {line}", flush=True)


def _failure(work: Path, ranks: list[_Rank], first: list[int]) -> RankFailed:
    """The root cause: the earliest error that is not a peer's reaction to it, else the rank that died first."""
    errors = [json.loads(p.read_text()) for p in sorted(work.glob("error*.json"))]
    errors.sort(key=lambda e: (any(s in e["message"] for s in _SECONDARY), e["time"]))
    logs = [r.text() for r in ranks]
    if errors:
        e = errors[0]
        detail = e["traceback"]
        message = _("rank {rank} failed: {error}: {message}\n{tail}").format(
            rank=e["rank"], error=e["error"], message=e["message"], tail=_tail(detail))
        rank, error = e["rank"], e["error"]
    else:
        dead = ranks[first[0]]
        code = dead.exitcode()
        how = (_("killed by signal {signal}").format(signal=signal.Signals(-code).name) if code < 0
               else _("exit code {code}").format(code=code))
        message = _("rank {rank} died ({how}) without a Python error (out of memory, a crash in C++, or killed from "
                    "outside); its last output:\n{tail}").format(rank=dead.rank, how=how,
                                                                 tail=_tail(dead.text()) or "    " + _("(none)"))
        rank, error, detail = dead.rank, "died", how
    others = [r.rank for r in ranks if r.rank != rank]
    if others:
        message += "\n" + _("The other rank(s) {others} were stopped, as torchrun does when one rank fails.").format(
            others=others)
    return RankFailed(message, rank, error, detail, logs)


def _threads(world_size: int, extra: dict[str, str]) -> int:
    """Torch threads per rank: ``OMP_NUM_THREADS`` if given or set, else the cores shared out (torchrun sets 1)."""
    env = extra.get("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS"))
    return int(env) if env and env.isdigit() else max(1, (os.cpu_count() or 1) // world_size)


def _validate(fn: Any, world_size: Any, timeout: Any) -> None:
    if not callable(fn):
        raise TypeError(_("launch() needs a function to run on every rank, not a {type}.").format(
            type=type(fn).__name__))
    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise ValueError(_("world_size must be a whole number of processes, at least 1, not {world_size!r}.").format(
            world_size=world_size))
    if not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(_("timeout must be a number of seconds above 0, not {timeout!r}: every run needs a "
                           "limit.").format(timeout=timeout))


def launch(fn: Callable[..., Any], world_size: int = 2, *, args: Sequence[Any] = (),
           kwargs: dict[str, Any] | None = None, timeout: float = 60.0, echo: bool = True,
           env: dict[str, str] | None = None) -> Run:
    """Run ``fn(rank, world_size, *args, **kwargs)`` in ``world_size`` processes; return every rank's result.

    Each rank finds what ``torch.distributed.init_process_group()`` reads in
    its environment, as under torchrun: ``MASTER_ADDR``, ``MASTER_PORT`` (a
    free port), ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``; ``OMP_NUM_THREADS``
    too. ``fn`` may be defined in a notebook (see :func:`portable`). Its
    arguments travel by cloudpickle too (tensors, an object of a notebook
    class), its return value by ``torch.save``.

    Every rank is a fresh interpreter (``sys.executable``), whatever start
    method ``multiprocessing`` is set to: it pays torch's import (a second or
    more) but inherits nothing from this process. A forked copy of a process
    that has imported ``torch._dynamo`` (the first DDP or optimizer step does)
    was measured to hang at exit, in ``ProcessGroupGloo``'s destructor; CUDA
    cannot be used after a fork either.

    Raises :class:`RankFailed` when a rank raises or dies (the others are
    stopped) and :class:`RunTimedOut` after ``timeout`` seconds. With
    ``echo``, every line a rank prints is shown as it comes, as
    ``[rank1] ...``. A port taken by someone else between choosing and
    binding it (EADDRINUSE) is retried once with another.
    """
    _validate(fn, world_size, timeout)
    sendable = portable(fn)  # pickled once, before any process starts: what cannot travel is named now
    for attempt in (1, 2):
        try:
            return _launch_once(sendable, world_size, tuple(args), dict(kwargs or {}), float(timeout), echo,
                                dict(env or {}))
        except RankFailed as err:
            if attempt == 2 or not any(word in str(err) for word in ("EADDRINUSE", "address already in use")):
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _rank_env(rank: int, world_size: int, port: int, threads: int, extra: dict[str, str]) -> dict[str, str]:
    """What torchrun would set, and ``COURSE_LANG``: a rank speaks the notebook's language (``i18n.use("ko")`` is
    this process's choice, which a fresh interpreter would not know) in the messages it makes, e.g. a check's."""
    return {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank), "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(world_size), "LOCAL_WORLD_SIZE": str(world_size), "OMP_NUM_THREADS": str(threads),
            "COURSE_LANG": current(), **extra}


def _launch_once(fn: Any, world_size: int, args: tuple, kwargs: dict, timeout: float, echo: bool,
                 env: dict[str, str]) -> Run:
    clock = sync_timer("cpu")
    start = clock()
    port, threads = free_port(), _threads(world_size, env)
    with tempfile.TemporaryDirectory(prefix="ddp-run-") as tmp:
        work = Path(tmp)
        job = {"fn": fn, "args": args, "kwargs": kwargs, "world_size": world_size, "threads": threads,
               "env": [_rank_env(r, world_size, port, threads, env) for r in range(world_size)]}
        try:
            (work / "job.pkl").write_bytes(cloudpickle.dumps(job))
        except Exception as err:  # noqa: BLE001
            raise PortableError(_("the arguments of this run cannot be sent to another process: {err}").format(
                err=err)) from None
        ranks: list[_Rank] = []
        try:
            for r in range(world_size):
                ranks.append(_Rank(r, work, job["env"][r]))
            _watch(ranks, work, time.monotonic() + timeout, timeout, echo)
        finally:
            _stop(ranks)
            if echo:
                _echo(ranks, final=True)
        return Run(_results(work, ranks), [r.text() for r in ranks], clock() - start, port)


def _results(work: Path, ranks: list[_Rank]) -> list[Any]:
    results = []
    for r in ranks:
        path = work / f"result{r.rank}.pt"
        if not path.exists():
            raise RankFailed(_("rank {rank} exited without returning a result (sys.exit or os._exit inside the "
                               "function?); its last output:\n{tail}").format(rank=r.rank, tail=_tail(r.text())),
                             r.rank, "no result", "", [])
        results.append(torch.load(path, map_location="cpu", weights_only=False))
    return results


def _watch(ranks: list[_Rank], work: Path, deadline: float, timeout: float, echo: bool) -> None:
    """Wait until every rank has exited; raise at the first failure or at the deadline."""
    while True:
        if echo:
            _echo(ranks)
        codes = [r.exitcode() for r in ranks]
        first = [r.rank for r, c in zip(ranks, codes) if c not in (None, 0)]
        if first:
            time.sleep(0.2)  # let a peer's secondary error land, so the root cause is told apart
            _stop(ranks, grace=1.0)
            if echo:
                _echo(ranks, final=True)
            raise _failure(work, ranks, first)
        if all(c == 0 for c in codes):
            return
        if time.monotonic() > deadline:
            running = [r.rank for r, c in zip(ranks, codes) if c is None]
            _stop(ranks)
            logs = [r.text() for r in ranks]
            last = "\n".join("  " + _("rank {rank}:").format(rank=i) + "\n"
                             + (_tail(logs[i], 4) or "    " + _("(no output)")) for i in running)
            raise RunTimedOut(
                _("the run did not finish within {timeout:g} s: rank(s) {running} were still running and were "
                  "stopped. A rank that waits in a collective another rank never calls (or a loop that never "
                  "ends) hangs until a limit like this one; a short timeout= in init_process_group turns the "
                  "first kind into an error that names the collective. Last output:\n{last}").format(
                    timeout=timeout, running=running, last=last), running, logs)
        time.sleep(0.02)


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
        reader = _LogTail(log_path)
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
