"""Verdicts for chapter 06 (multi-GPU): a DDP training function and gradients averaged by hand.

Both exercises run on real processes: the checks start 2 (or 3) gloo ranks
through :func:`helpers.processes.launch`, each bounded in time. What runs in each
rank is not the learner's function alone but :func:`graded_train` or
:func:`graded_average` from this module, which call it (through
:func:`helpers.checks.solved`, so the course's own version is a tripwire in the
child too) while spies built on :func:`helpers.checks.patched` note what it
did: which rank saved the checkpoint, whether ``set_epoch`` was called, how
many rows went through the DDP model, whether the model was moved after it
was wrapped. The weights are then compared, in the grader's process, with one
process trained on the same batches; when the ranks agree but the weights
differ, the reference is replayed with common mistakes (no ``zero_grad``, a
sampler without ``seed=``, a seed per rank) and the one that matches is named.

One run serves both training cells: :func:`train_outcome` keeps it, keyed by
the function's code and the case, so grading a class pays one launch per case.
Hidden cases (the inputs) stay in the notebook's cells.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch

from helpers.checks.core import CheckFailed, check, fail_unless, solved
from helpers.checks.delegation import CourseVersionCalled
from helpers.checks.patching import patched
from helpers.i18n import _
from helpers.models import MLP, make_regression
from helpers.processes import (
    PortableError,
    RankFailed,
    RunTimedOut,
    busy_factor,
    launch,
    portable,
)
from helpers.record import Record

__all__ = [
    "check_average_gradients",
    "check_ddp_checkpoint",
    "check_ddp_weights",
    "graded_average",
    "graded_train",
    "reference_weights",
    "train_outcome",
]

HIDDEN = 16  #: the exercise's model: MLP(features, HIDDEN, 1, depth=1)
LIMIT = 45.0  #: seconds a graded run may take on a quiet machine before it is stopped (x busy_factor())
SAVE_DELAY = 0.5  #: rank 0 waits this long before writing: a rank that does not wait for it reads too early


def _model(features: int, outputs: int) -> torch.nn.Module:
    return MLP(features, HIDDEN, outputs, depth=1)


def _cpu_state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}


def _error_record(err: BaseException, phase: str) -> dict[str, str]:
    return {"type": type(err).__name__, "message": str(err), "phase": phase}


# --------------------------------------------------------------------------- what runs in every rank


class _TrainSpy:
    """What a learner's training function did on one rank, noted by patches on torch's classes."""

    def __init__(self, rank: int, checkpoint: str) -> None:
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.utils.data import DistributedSampler

        self.rank, self.checkpoint, self.DDP = rank, checkpoint, DDP
        self.wrapped: list[Any] = []
        self.moved: set[int] = set()
        self.notes: dict[str, Any] = {"wraps": 0, "moved_before": False, "moved_after": False, "rows": 0,
                                      "set_epoch": [], "saves": [], "loads": [], "early_load": False,
                                      "trained": None}
        self.orig = {"init": DDP.__init__, "forward": DDP.forward, "to": torch.nn.Module.to,
                     "cuda": torch.nn.Module.cuda, "save": torch.save, "load": torch.load,
                     "set_epoch": DistributedSampler.set_epoch, "pg": torch.distributed.init_process_group}
        # class attributes must be plain functions (a bound method would not receive the instance)
        self.changes = [(DDP, "__init__", self._method(self._init)), (DDP, "forward", self._method(self._forward)),
                        (torch.nn.Module, "to", self._method(self._mover("to"))),
                        (torch.nn.Module, "cuda", self._method(self._mover("cuda"))),
                        (torch, "save", self._save), (torch, "load", self._load),
                        (DistributedSampler, "set_epoch", self._method(self._set_epoch)),
                        (torch.distributed, "init_process_group", self._init_pg)]

    @staticmethod
    def _method(bound):
        def method(self, *args, **kwargs):
            return bound(self, *args, **kwargs)

        return method

    def capture(self) -> None:
        """The trained weights, taken when the rank first touches the checkpoint (before any load)."""
        if self.notes["trained"] is None and self.wrapped:
            self.notes["trained"] = _cpu_state(self.wrapped[-1].module)

    def _init(spy, self, module, *args, **kwargs):  # noqa: N805 - spy is the _TrainSpy, self the DDP object
        spy.notes["wraps"] += 1
        spy.notes["moved_before"] = spy.notes["moved_before"] or id(module) in spy.moved
        spy.orig["init"](self, module, *args, **kwargs)
        spy.wrapped.append(self)

    def _forward(spy, self, *inputs, **kwargs):  # noqa: N805
        first = inputs[0] if inputs else next(iter(kwargs.values()), None)
        spy.notes["rows"] += int(first.shape[0]) if isinstance(first, torch.Tensor) and first.dim() else 0
        return spy.orig["forward"](self, *inputs, **kwargs)

    def _mover(spy, name: str):  # noqa: N805
        def move(self, *args, **kwargs):  # noqa: ANN001
            inner = getattr(self, "module", self) if isinstance(self, spy.DDP) else self
            if spy.wrapped and any(inner is w.module for w in spy.wrapped) and not spy.notes["moved_before"]:
                spy.notes["moved_after"] = True
            spy.moved.add(id(self))
            return spy.orig[name](self, *args, **kwargs)

        return move

    def _save(spy, obj, f, *args, **kwargs):  # noqa: N805
        spy.capture()
        keys = sorted(obj) if isinstance(obj, dict) else None
        spy.notes["saves"].append({"path": str(f), "keys": keys})
        if spy.rank == 0:
            time.sleep(SAVE_DELAY)
        out = spy.orig["save"](obj, f, *args, **kwargs)
        if spy.rank == 0:
            Path(spy.checkpoint + ".written").touch()
        return out

    def _load(spy, f, *args, **kwargs):  # noqa: N805
        spy.capture()
        if spy.rank != 0 and not os.path.exists(spy.checkpoint + ".written"):
            spy.notes["early_load"] = True
        spy.notes["loads"].append(str(f))
        return spy.orig["load"](f, *args, **kwargs)

    def _set_epoch(spy, self, epoch):  # noqa: N805
        spy.notes["set_epoch"].append(int(epoch))
        return spy.orig["set_epoch"](self, epoch)

    def _init_pg(spy, *args, **kwargs):  # noqa: N805 - a short limit: a skipped collective errs, not hangs
        kwargs.setdefault("timeout", timedelta(seconds=20 * busy_factor()))
        return spy.orig["pg"](*args, **kwargs)


def _returned(value: Any) -> Any:
    """A state dict, copied; anything else by its type's name (said in the grader's language, not the rank's)."""
    if isinstance(value, dict) and all(isinstance(v, torch.Tensor) for v in value.values()):
        return {k: v.detach().cpu().clone() for k, v in value.items()}
    return type(value).__name__


def graded_train(rank: int, world_size: int, fn: Any, x: torch.Tensor, y: torch.Tensor, checkpoint: str,
                 case: dict[str, Any]) -> dict[str, Any]:
    """Run the learner's ``train_ddp`` (``fn``, sent by value) on this rank under the spies; return what it did."""
    import torch.distributed as dist

    spy = _TrainSpy(rank, checkpoint)
    error, returned = None, None
    with warnings.catch_warnings(), patched(spy.changes, namespaces=[fn.__globals__]):
        warnings.simplefilter("ignore")
        try:
            returned = _returned(solved(fn, rank, world_size, x, y, checkpoint, **case))
        except BaseException as err:  # noqa: BLE001 - every outcome is a verdict for the grader's process
            error = _error_record(err, "checkpoint" if spy.notes["saves"] or spy.notes["loads"] else "training")
        spy.capture()
    if dist.is_initialized():  # left over (or the learner raised): peers waiting in a collective now fail fast
        dist.destroy_process_group()
    return {**spy.notes, "returned": returned, "error": error}


def graded_average(rank: int, world_size: int, fn: Any, x: torch.Tensor, y: torch.Tensor, seed: int,
                   frozen: bool, unused: bool = False) -> dict[str, Any]:
    """This rank's own gradients, then the learner's ``average_gradients`` (``fn``, sent by value) on them.

    What DDP would leave on every rank is the mean of the ranks' own
    gradients (chapter 06 shows it on real processes); the grader computes
    that mean from every rank's ``local`` gradients. No DDP here, so a rank
    starts without importing ``torch._dynamo`` (seconds).

    ``frozen``: the first layer has ``requires_grad=False`` (its ``p.grad`` is
    None). ``unused``: a trainable layer the forward pass never uses, added
    last (``requires_grad=True`` and still ``p.grad`` None): a filter on
    ``p.requires_grad`` passes it to ``all_reduce``. The spy on ``all_reduce``
    notes a None passed (and whether a gradient was reduced before it), a
    parameter reduced instead of its gradient, and ``ReduceOp.AVG``.

    A barrier right after joining: gloo connects every pair of ranks inside
    ``init_process_group``, and a rank that raised at once (a blank stub) and
    left could close its side while a peer was still connecting ("connectFullMesh
    failed" on that peer, about 1 run in 15 on a loaded machine). After the
    barrier every rank has connected, so every rank reaches the learner's code.
    """
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=timedelta(seconds=10 * busy_factor()))
    try:
        dist.barrier()  # every rank has connected before any can leave
        torch.manual_seed(seed)
        model = _model(x.shape[1], y.shape[1])
        if frozen:
            model.net[0].requires_grad_(False)
        if unused:
            model.add_module("unused", torch.nn.Linear(2, 1))  # trainable, never called by forward
        torch.nn.functional.mse_loss(model(x[rank::world_size]), y[rank::world_size]).backward()
        local = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
        weights = {p.data_ptr() for p in model.parameters()}
        notes = {"weights_reduced": False, "none_reduced": None, "avg": False, "reduced": 0}
        original = dist.all_reduce

        def spy(tensor, *args, **kwargs):
            op = kwargs.get("op", args[0] if args else dist.ReduceOp.SUM)
            notes["avg"] = notes["avg"] or op == dist.ReduceOp.AVG
            if tensor is None:
                if notes["none_reduced"] is None:  # how many gradients were reduced before the first None
                    notes["none_reduced"] = notes["reduced"]
            else:
                notes["weights_reduced"] = notes["weights_reduced"] or tensor.data_ptr() in weights
                notes["reduced"] += 1
            return original(tensor, *args, **kwargs)

        error = None
        with warnings.catch_warnings(), patched([(dist, "all_reduce", spy)], namespaces=[fn.__globals__]):
            warnings.simplefilter("ignore")
            try:
                solved(fn, model)
            except BaseException as err:  # noqa: BLE001
                error = _error_record(err, "average")
        return {"mine": [None if p.grad is None else p.grad.detach().clone() for p in model.parameters()],
                "local": local, "error": error, **notes}
    finally:
        dist.destroy_process_group()


# --------------------------------------------------------------------------- the reference, in one process


def _shards(n: int, world_size: int, seed: int, epoch: int | None) -> list[list[int]]:
    from torch.utils.data import DistributedSampler

    data = list(range(n))
    out = []
    for rank in range(world_size):
        sampler = DistributedSampler(data, num_replicas=world_size, rank=rank, shuffle=True, seed=seed)
        if epoch is not None:
            sampler.set_epoch(epoch)
        out.append(list(sampler))
    return out


def reference_weights(x: torch.Tensor, y: torch.Tensor, world_size: int, epochs: int, batch_size: int, lr: float,
                      seed: int, set_epoch: bool = True, zero_grad: bool = True,
                      sampler_seeds: list[int] | None = None) -> dict[str, torch.Tensor]:
    """One process doing what DDP does on ``world_size`` ranks: per step, the mean of the ranks' mean losses.

    Each rank's batch comes from its ``DistributedSampler`` share (reshuffled
    each epoch when ``set_epoch``); averaging the ranks' gradients is the
    gradient of the average of their losses, so one backward on that average
    gives DDP's step exactly (up to rounding). The other flags replay a
    mistake, so a verdict can name the one a learner's weights match:
    ``zero_grad=False`` lets gradients pile up over the steps;
    ``sampler_seeds`` gives each rank's sampler its own seed (``[0, 0]``: no
    ``seed=`` given; ``[seed, seed + 1]``: a seed per rank).
    """
    sys.audit("course.version", "helpers.checks.ch06:reference_weights")  # the grader: refused to the learner's code
    torch.manual_seed(seed)
    model = _model(x.shape[1], y.shape[1])
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    seeds = sampler_seeds or [seed] * world_size
    for epoch in range(epochs):
        shards = [_shards(len(x), world_size, s, epoch if set_epoch else None)[rank] for rank, s in enumerate(seeds)]
        for k in range(math.ceil(len(shards[0]) / batch_size)):
            if zero_grad:
                optimizer.zero_grad()
            batches = [s[k * batch_size:(k + 1) * batch_size] for s in shards]
            loss = sum(torch.nn.functional.mse_loss(model(x[b]), y[b]) for b in batches) / world_size
            loss.backward()
            optimizer.step()
    return _cpu_state(model)


def _largest_gap(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    if set(a) != set(b):
        return math.inf
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


def _close(a: Any, b: Any) -> bool:
    return isinstance(a, dict) and isinstance(b, dict) and _largest_gap(a, b) <= 1e-5


# --------------------------------------------------------------------------- launching, once per case


@dataclass
class TrainOutcome:
    """One graded run of ``train_ddp`` on one case: each rank's notes, or why there are none."""

    case: dict[str, Any]
    x: torch.Tensor
    y: torch.Tensor
    expected: dict[str, torch.Tensor]  # one process trained on the same batches
    records: list[dict[str, Any]] | None
    failure: str | None  # the launch itself failed (a crash outside the function, a timeout)


#: Runs already made (the weights and the checkpoint checks share one), a cache: lower-case, so the grader's guard
#: does not take its filling for tampering. An outcome is used only if the course's code recorded it
#: (``_vouched``, which the grader's referee keeps a copy of): one put there by a learner's code is not.
_outcomes: dict[tuple, TrainOutcome] = {}
_vouched = Record()


def _launch(fn: Any, world_size: int, args: tuple) -> tuple[list | None, str | None]:
    try:
        return launch(fn, world_size, args=args, timeout=LIMIT * busy_factor(), echo=False).results, None
    except RankFailed as err:
        return None, _("the run on {world_size} processes failed: {err}").format(world_size=world_size, err=err)
    except RunTimedOut as err:
        return None, _("the run on {world_size} processes did not end: {err}").format(world_size=world_size, err=err)


def _portable(fn: Any, name: str):
    try:
        return portable(fn)
    except PortableError as err:
        raise CheckFailed(_("`{name}` cannot run in another process: {err}").format(name=name, err=err)) from None


def train_outcome(train_ddp: Any, n: int = 12, features: int = 5, epochs: int = 3, batch_size: int = 2,
                  lr: float = 0.1, seed: int = 2, world_size: int = 2) -> TrainOutcome:
    """Launch ``train_ddp`` on ``world_size`` gloo processes for this case, or reuse the run already made.

    The default seed is not 0 on purpose: DistributedSampler's own default seed is 0, so a sampler made
    without ``seed=`` would pass a case with seed 0.
    """
    sent = _portable(train_ddp, "train_ddp")
    case = {"epochs": epochs, "batch_size": batch_size, "lr": lr, "seed": seed}
    key = (sent.fingerprint, n, features, world_size, tuple(sorted(case.items())))
    known = _outcomes.get(key)
    if known is None or not _vouched.intact() or not any(o is known for o in _vouched):
        x, y = make_regression(n, features, 1, seed=seed + 100)
        # first, so that forked ranks inherit what the first optimizer step imports (torch._dynamo, seconds)
        expected = reference_weights(x, y, world_size, epochs, batch_size, lr, seed)
        with tempfile.TemporaryDirectory(prefix="ch06-ckpt-") as tmp:
            checkpoint = str(Path(tmp) / "checkpoint.pt")
            records, failure = _launch(graded_train, world_size, (sent, x, y, checkpoint, case))
        known = _outcomes[key] = TrainOutcome({**case, "world_size": world_size}, x, y, expected, records, failure)
        _vouched.append(known)
    return known


def _learner_error(outcome: TrainOutcome, phases: tuple[str, ...]) -> None:
    """Fail with the first error the learner's function raised in one of ``phases``, naming the rank."""
    fail_unless(outcome.failure)
    for rank, rec in enumerate(outcome.records or []):
        err = rec["error"]
        if err and err["phase"] in phases:
            _reraise(err)
            raise CheckFailed(_("train_ddp raised {error} on rank {rank}: {message}").format(
                error=err["type"], rank=rank, message=err["message"]) + _hint(err["message"]))


def _reraise(err: dict[str, str]) -> None:
    """A check's own failure in a rank (e.g. "not written yet", or the course's version called) is the verdict."""
    if err["type"] == "CourseVersionCalled":
        raise CourseVersionCalled(err["message"])
    if err["type"] == "CheckFailed":
        raise CheckFailed(err["message"])


def _hint(message: str) -> str:
    """A hint for torch's own error ``message`` (matched in English: torch's messages are not translated)."""
    if "initialize the default process group twice" in message:
        return " " + _("(call dist.init_process_group once, at the start of the function)")
    if "nccl" in message.lower():
        return " " + _("(nccl needs CUDA GPUs, one per rank, and moves CUDA tensors only: for CPU tensors use gloo. "
                       "dist.get_default_backend_for_device(device) picks the right one: 'gloo' for 'cpu', 'nccl' for "
                       "'cuda'.)")
    if "Timed out" in message:
        return " " + _("(the ranks did not call the same collectives: every rank must run the same number of steps "
                       "and call barrier() the same number of times)")
    return ""


def _average_hint(message: str) -> str:
    """:func:`_hint`, and what is particular to ``average_gradients`` (called inside a process group)."""
    if "NoneType" in message or "None" in message:
        return " " + _("(a parameter frozen with requires_grad=False, and a trainable one the forward pass never "
                       "uses, both have p.grad None: skip them by `p.grad is None`; a p.requires_grad filter lets the "
                       "unused one through)")
    if "initialize the default process group twice" in message:
        return " " + _("(the process group is already set up when average_gradients is called: do not init it "
                       "again)")
    return _hint(message)


# --------------------------------------------------------------------------- verdicts: exercise 1


def _named(verdict):
    """Every failure of a train_ddp verdict starts by naming the function (and its case's world size)."""
    def named(train_ddp: Any, **case: Any) -> None:
        try:
            verdict(train_ddp, **case)
        except CheckFailed as err:
            text = str(err)
            if text.startswith("train_ddp") or isinstance(err, CourseVersionCalled):  # named already, or not ours
                raise CheckFailed(text) from None
            raise CheckFailed(_("train_ddp on {world_size} processes: {text}").format(
                world_size=case.get("world_size", 2), text=text)) from None

    named.__name__, named.__doc__ = verdict.__name__, verdict.__doc__
    return named


@_named
def check_ddp_weights(train_ddp: Any, **case: Any) -> None:
    """Every rank ends with the same weights, equal to one process trained on the same batches."""
    outcome = train_outcome(train_ddp, **case)
    _learner_error(outcome, ("training",))
    records = outcome.records
    trained = [rec["trained"] for rec in records]
    check(all(t is not None for t in trained),
          _("no DistributedDataParallel model was made on every rank: wrap the model with "
            "DistributedDataParallel(model), which broadcasts rank 0's weights and averages the gradients."))
    expected = outcome.expected
    if all(_close(t, expected) for t in trained):
        check(not any(rec["moved_after"] for rec in records),
              _("the model was wrapped before it was moved: DDP(model) and then .to(device). DDP registers the "
                "parameters where they are when it wraps them (on a GPU it needs them there already): move the "
                "model to its device first, then wrap it."))
        return
    _diagnose(outcome, trained, expected)


def _diagnose(outcome: TrainOutcome, trained: list, expected: dict) -> None:
    c, records = outcome.case, outcome.records
    n, world = len(outcome.x), c["world_size"]
    share = math.ceil(n / world) * c["epochs"]
    if not all(_close(t, trained[0]) for t in trained[1:]):
        raise CheckFailed(_(
            "the ranks ended with different weights (largest difference {gap:.3g}): each trained alone. Train through "
            "the DDP-wrapped model (ddp_model(x), not the inner module), which averages the gradients of all ranks "
            "during backward.").format(gap=_largest_gap(trained[0], trained[1])))
    rows = [rec["rows"] for rec in records]
    check(not any(r >= c["epochs"] * n for r in rows),
          _("every rank trained on the whole dataset ({rows} rows through the model in {epochs} epochs; its share is "
            "{share}): give the DataLoader a DistributedSampler(dataset, num_replicas=world_size, rank=rank, "
            "shuffle=True, seed=seed), so each rank gets its own part of every epoch.").format(
              rows=rows[0], epochs=c["epochs"], share=share))
    same_order = reference_weights(outcome.x, outcome.y, world, c["epochs"], c["batch_size"], c["lr"], c["seed"],
                                   set_epoch=False)
    calls = records[0]["set_epoch"]
    check(not (_close(trained[0], same_order) or (calls and calls != list(range(c["epochs"])))),
          _("the data came in the same order every epoch (set_epoch was called with {calls}): call "
            "sampler.set_epoch(epoch) at the start of every epoch; without it DistributedSampler shuffles with the "
            "same seed each time.").format(calls=calls))
    _name_the_replay(outcome, trained[0])
    raise CheckFailed(_(
        "the ranks agree, but their weights differ from one process trained on the same batches (largest difference "
        "{gap:.3g}): build MLP(features, 16, 1, depth=1) right after torch.manual_seed(seed), use SGD(lr=lr), the "
        "mean squared error, batch_size rows per rank, and one optimizer step per batch.").format(
            gap=_largest_gap(trained[0], expected)))


def _replays(seed: int, world: int) -> list[tuple[dict[str, Any], str]]:
    """Mistakes that leave the ranks agreeing with each other, as :func:`reference_weights` flags, and what to say."""
    own_seed = _("each rank's DistributedSampler had its own seed ({which}): the weights match that run. The ranks "
                 "then shuffle differently, so their shares overlap and some rows are never seen. Give every rank the "
                 "same seed=seed; the sampler's rank= already picks each rank's share.")
    return [
        ({"zero_grad": False},
         _("the gradients piled up from step to step: they match a run that never zeroes them. Call "
           "optimizer.zero_grad() before every backward (backward adds to .grad, it does not replace it).")),
        ({"sampler_seeds": [0] * world},
         _("the DistributedSampler shuffled with its default seed 0, not seed={seed}: the weights match a run whose "
           "sampler was made without seed=. Pass seed=seed to DistributedSampler (the model's torch.manual_seed "
           "does not reach the sampler, which seeds its own shuffle with seed + epoch).").format(seed=seed)),
        ({"sampler_seeds": [seed + r for r in range(world)]}, own_seed.format(which="seed + rank")),
        ({"sampler_seeds": list(range(world))}, own_seed.format(which=_("its rank"))),
    ]


def _name_the_replay(outcome: TrainOutcome, trained: dict[str, torch.Tensor]) -> None:
    """Replay the run with each common mistake; fail naming the first one the learner's weights match."""
    c = outcome.case
    for flags, message in _replays(c["seed"], c["world_size"]):
        replay = reference_weights(outcome.x, outcome.y, c["world_size"], c["epochs"], c["batch_size"], c["lr"],
                                   c["seed"], **flags)
        if _close(trained, replay) and not _close(replay, outcome.expected):
            raise CheckFailed(message)


@_named
def check_ddp_checkpoint(train_ddp: Any, **case: Any) -> None:
    """Only rank 0 writes the checkpoint, every rank reads it after it is written, and gets rank 0's weights."""
    outcome = train_outcome(train_ddp, **case)
    _learner_error(outcome, ("training",))
    records = outcome.records
    for rank, rec in enumerate(records):
        error = f" ({rec['error']['type']}: {rec['error']['message'][:120]})" if rec["error"] else ""
        check(not rec["early_load"],
              _("rank {rank} read the checkpoint before rank 0 had written it{error}: call dist.barrier() on every "
                "rank after rank 0's torch.save and before torch.load.").format(rank=rank, error=error))
    _learner_error(outcome, ("checkpoint",))
    savers = [rank for rank, rec in enumerate(records) if rec["saves"]]
    check(savers != [], _("nobody saved a checkpoint: on rank 0, torch.save(model.module.state_dict(), checkpoint)."))
    check(savers == [0],
          _("ranks {savers} all wrote the checkpoint: every rank saving writes the same file several times at once "
            "(a waste at best, a corrupt file at worst). Save only on rank 0: if rank == 0: torch.save(...).").format(
              savers=savers)
          if len(savers) > 1 else _("rank {rank} wrote the checkpoint; by convention rank 0 does.").format(
              rank=savers[0]))
    keys = records[0]["saves"][0]["keys"] or []
    check(not any(k.startswith("module.") for k in keys),
          _("the checkpoint's keys start with 'module.' ({keys}): that is the DDP wrapper's state_dict. Save "
            "model.module.state_dict() (the model inside), so a plain model can load it without DDP.").format(
              keys=keys[:2]))
    saved = records[0]["trained"]
    for rank, rec in enumerate(records):
        check(rec["loads"], _("rank {rank} never read the checkpoint back: every rank torch.load()s it after the "
                              "barrier.").format(rank=rank))
        check(_close(rec["returned"], saved),
              _("rank {rank} returned {what} that is not the checkpoint rank 0 wrote: return the state dict "
                "torch.load gave back.").format(rank=rank, what=_what_returned(rec["returned"])))


def _what_returned(returned: Any) -> str:
    """What a rank's function returned, in words: a rank sends a state dict, or the name of the type it got."""
    if isinstance(returned, dict):
        return _("a state dict")
    return _("a {type}").format(type=returned) if isinstance(returned, str) else str(returned)


# --------------------------------------------------------------------------- verdicts: exercise 2


def check_average_gradients(average_gradients: Any, world_size: int = 2, n: int = 8, features: int = 4,
                            seed: int = 0, frozen: bool = False, unused: bool = False) -> None:
    """On every rank, the gradients after ``average_gradients(model)`` equal DDP's: the mean of all ranks' own.

    ``frozen``: the model's first layer is frozen (``requires_grad=False``);
    ``unused``: it has a trainable layer its forward pass never uses. Both
    leave ``p.grad`` None.
    """
    sent = _portable(average_gradients, "average_gradients")
    x, y = make_regression(n, features, 1, seed=seed + 200)
    records, failure = _launch(graded_average, world_size, (sent, x, y, seed, frozen, unused))
    fail_unless(failure)
    for rank, rec in enumerate(records):
        _check_none_reduced(rank, rec)
    for rank, rec in enumerate(records):
        err = rec["error"]
        if err:
            _reraise(err)
            raise CheckFailed(_("average_gradients raised {error} on rank {rank}: {message}").format(
                error=err["type"], rank=rank, message=err["message"]) + _average_hint(err["message"]))
    ddp = [None if g[0] is None else torch.stack(g).mean(0) for g in zip(*(rec["local"] for rec in records))]
    verdicts = {}
    for rank, rec in enumerate(records):
        try:
            _check_rank_grads(rank, rec, ddp, world_size)
        except CheckFailed as err:
            verdicts[rank] = str(err)
    if not verdicts:
        return
    right = [rank for rank in range(world_size) if rank not in verdicts]
    wrong = sorted(verdicts)
    if right:
        raise CheckFailed(_(
            "the gradients equal DDP's on rank(s) {right} but not on rank(s) {wrong}: every rank must divide. Each "
            "rank holds its own copy of the all-reduced sum, so the division (like everything in average_gradients) "
            "must run on every rank, not only on rank 0. (Rank {rank}: {verdict})").format(
                right=right, wrong=wrong, rank=wrong[0], verdict=verdicts[wrong[0]]))
    raise CheckFailed(verdicts[wrong[0]])


def _check_none_reduced(rank: int, rec: dict[str, Any]) -> None:
    """``all_reduce(None)`` raises a TypeError that says nothing of why p.grad was None: say it here."""
    before = rec.get("none_reduced")
    if before is None:
        return
    if before == 0:
        raise CheckFailed(_(
            "a p.grad None reached dist.all_reduce on rank {rank} (a TypeError): a parameter frozen with "
            "requires_grad=False, or one the forward pass never uses, has grad None after backward. Skip every "
            "parameter whose p.grad is None: `if p.grad is None: continue`.").format(rank=rank))
    raise CheckFailed(_(
        "a p.grad None reached dist.all_reduce on rank {rank} (a TypeError), after {before} gradient(s): a trainable "
        "layer (requires_grad=True) that the forward pass never uses has p.grad None, so a filter on p.requires_grad "
        "lets it through. Skip parameters by `p.grad is None` instead (it also skips frozen ones).").format(
            rank=rank, before=before))


def _check_rank_grads(rank: int, rec: dict[str, Any], ddp: list, world: int) -> None:
    """The rank's gradients after ``average_gradients`` against DDP's (the mean of every rank's own)."""
    pairs = [(m, d, l) for m, d, l in zip(rec["mine"], ddp, rec["local"]) if d is not None]
    frozen_touched = [m for m, d in zip(rec["mine"], ddp) if d is None and m is not None and m.abs().max() > 0]
    check(not frozen_touched,
          _("a frozen parameter (requires_grad=False) got a nonzero gradient: leave p.grad None alone."))
    if all(m is not None and torch.allclose(m, d, rtol=1e-5, atol=1e-7) for m, d, _ in pairs):
        return
    check(all(m is not None for m, _, _ in pairs), _("on rank {rank} a gradient was removed (p.grad is None after "
          "average_gradients): average it in place, or assign the average back to p.grad.").format(rank=rank))
    check(not rec["weights_reduced"],
          _("average_gradients all-reduced the weights, not the gradients: all_reduce p.grad, not p or p.data."))
    own = [float((m.flatten() @ l.flatten()) / (l.flatten() @ l.flatten())) for m, _, l in pairs if l.abs().max() > 0]
    if own and max(own) - min(own) < 1e-6 and all(torch.allclose(m, own[0] * l) for m, _, l in pairs):
        message = (_("the gradients on rank {rank} are still this rank's own: nothing was exchanged. Call "
                     "dist.all_reduce(p.grad) for every parameter with a gradient, then divide by "
                     "dist.get_world_size().") if abs(own[0] - 1) < 1e-6 else
                   _("the gradients on rank {rank} are still this rank's own, only scaled: nothing was exchanged. "
                     "Call dist.all_reduce(p.grad) for every parameter with a gradient, then divide by "
                     "dist.get_world_size()."))
        raise CheckFailed(message.format(rank=rank))
    ratios = [float((m.flatten() @ d.flatten()) / (d.flatten() @ d.flatten())) for m, d, _ in pairs if d.abs().max() > 0]
    if ratios and max(ratios) - min(ratios) < 1e-3:
        r = ratios[0]
        check(not (rec.get("avg") and r < 1),
              _("the gradients are {ratio:.3g} times DDP's on {world} processes: dist.ReduceOp.AVG already divides by "
                "the world size, so dividing again makes them 1/world_size ({share:.3g}) too small. After "
                "all_reduce(p.grad, op=ReduceOp.AVG) do not divide; or keep the division and use "
                "op=ReduceOp.SUM.").format(ratio=r, world=world, share=1 / world))
        check(abs(r - world) > 1e-3,
              _("the gradients are {world} times DDP's: they were summed over the {world} processes, not averaged. "
                "Divide the all-reduced gradient by dist.get_world_size().").format(world=world))
        raise CheckFailed(_("the gradients are {ratio:.3g} times DDP's on {world} processes: divide the sum by "
                            "dist.get_world_size(), the number of processes, not a fixed number.").format(
                                ratio=r, world=world))
    raise CheckFailed(_("on rank {rank} the gradients after average_gradients differ from DDP's on the same batches: "
                        "sum each p.grad over all ranks with dist.all_reduce (op SUM), then divide by the world "
                        "size.").format(rank=rank))
