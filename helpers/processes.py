"""Start processes that run a function, from a notebook, a grader or pytest: sent by value, bounded, never left behind.

The launcher under chapter 06's DDP (:mod:`helpers.ddp`) and the checks of
chapters 04 and 06 (a DataLoader worker's function, a rank's function): what
is not about DDP lives here, on the ground floor, so a check that only sends a
function to another process need not import a technique.

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
  limit with :class:`RunTimedOut`, a limit a busy machine stretches
  (:func:`busy_factor`);
* **no process is left behind**: each rank leads its own process group, which
  is sent SIGTERM, then SIGKILL, and reaped, on success, failure, timeout or
  an interrupt;
* **output stays readable**: each rank writes to its own log, streamed with
  its rank in front of every line, never to the kernel's stderr.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import timeit
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cloudpickle
import torch

from helpers.i18n import _, current

__all__ = [
    "LogTail",
    "Portable",
    "PortableError",
    "RankFailed",
    "Run",
    "RunTimedOut",
    "busy_factor",
    "free_port",
    "launch",
    "portable",
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


# --------------------------------------------------------------------------- ports, limits, errors and results


def free_port() -> int:
    """A TCP port nobody is listening on now: the system picks one when asked to bind to port 0."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def busy_factor() -> float:
    """How busy this machine is now: runnable processes per core (the 1-minute load average), at least 1.

    A wall-clock limit that a quiet machine meets with room to spare (a DDP run, a DataLoader worker's start)
    is multiplied by it, so a busy machine does not turn a slow, correct run into a failure; an answer that
    hangs is still stopped, in time proportional to the load. 1.0 where the load average is unknown.
    """
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # Windows has no load average
        return 1.0
    return max(1.0, load / (os.cpu_count() or 1))


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


class LogTail:
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


class _Rank(LogTail):
    """One started rank: its process, its log, and how to stop its whole process group."""

    def __init__(self, rank: int, work: Path, env: dict[str, str]) -> None:
        super().__init__(work / f"rank{rank}.log")
        self.rank = rank
        boot = "import sys; from helpers.processes import _spawned_child; _spawned_child()"
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
    clock = timeit.default_timer  # a plain host clock: the ranks are timed from here, nothing to synchronise
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
