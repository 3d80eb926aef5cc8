"""Verdicts for chapter 02 (devices): ``choose_device``, ``move_batch``, ``forward_on``.

Each function takes one case from a grade cell (the learner's function, a
:class:`~helpers.checks.fakes.machine.FakeMachine`, a batch, a model, the answer it
must give) and raises :class:`~helpers.checks.core.CheckFailed` with a
message that names the mistake. Which machines, batches and answers are
graded stays in the cells: this module is public to every learner.

One concern per verdict (a string instead of a ``torch.device``, a device
the machine lacks, a tensor left behind at depth, a mutated batch, gradients
recorded, dropout on), so a mistake loses the points of its own cell only:
only :func:`check_returns_device` judges the type of what ``choose_device``
returns; the other verdicts judge the device a string names, as
``torch.device(string)`` would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from helpers.checks.core import CheckFailed, check, check_close, check_equal, check_type, solved
from helpers.checks.fakes.machine import FakeMachine
from helpers.i18n import N_, _

__all__ = [
    "check_automatic_choice",
    "check_forward_eval",
    "check_forward_output",
    "check_forward_parameterless",
    "check_forward_records_nothing",
    "check_forward_stays_on",
    "check_keeps_batch_alone",
    "check_keeps_structure",
    "check_moves_flat",
    "check_moves_nested",
    "check_refuses",
    "check_request",
    "check_returns_device",
    "machine_words",
]

# --- choose_device -----------------------------------------------------------------------------------------------

# whole phrases, not number words, so each language says "two GPUs" its own way
_GPUS = {1: N_("a machine with one CUDA GPU"), 2: N_("a machine with two CUDA GPUs"),
         3: N_("a machine with three CUDA GPUs"), 4: N_("a machine with four CUDA GPUs")}


def machine_words(machine: FakeMachine) -> str:
    """The machine in the words a message uses: "a machine with two CUDA GPUs", "a Mac with MPS", ..."""
    if machine.cuda:
        if machine.cuda in _GPUS:
            return _(_GPUS[machine.cuda])
        return _("a machine with {n} CUDA GPUs").format(n=machine.cuda)
    if machine.mps:
        return _("a Mac with MPS")
    if machine.build:
        return _("a machine without a GPU, running torch built for {build}").format(build=machine.build.upper())
    return _("a CPU-only machine")


def _on_machine(call: str, machine: FakeMachine) -> str:
    """Where a message says the call ran: "choose_device('cuda') on a machine with two CUDA GPUs"."""
    return _("{call} on {machine}").format(call=call, machine=machine_words(machine))


def _on(machine: FakeMachine, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` while torch describes ``machine`` (names the learner imported from torch included)."""
    learner_globals = getattr(fn, "__globals__", None)
    with machine.active(namespaces=[learner_globals] if isinstance(learner_globals, dict) else []):
        return solved(fn, *args)


def _matches(got: Any, expected: str) -> bool:
    """``got`` is the device ``expected`` names; "cuda" and "cuda:0" (or "mps" and "mps:0") are one device."""
    if not isinstance(got, torch.device):
        return False
    want = torch.device(expected)
    if got.type != want.type:
        return False
    return got.index in (None, 0) if want.index in (None, 0) else got.index == want.index


def _as_device(value: Any) -> Any:
    try:
        return torch.device(value) if isinstance(value, str) else value
    except RuntimeError:
        return value


def _automatic_hint(machine: FakeMachine, expected: str) -> str:
    kind = torch.device(expected).type
    if kind == "cuda":
        return _("prefer CUDA when torch.cuda.is_available(); 'cuda' (the current GPU) or 'cuda:0' is the first GPU.")
    if kind == "mps":
        return _("after CUDA, check torch.backends.mps.is_available() before falling back to the CPU.")
    if machine.build:
        return _("torch.accelerator.current_accelerator() (and torch.backends.{build}.is_built()) names what torch was "
                 "built for, not what the machine has: ask torch.cuda.is_available() or "
                 "torch.accelerator.is_available() (or pass check_available=True).").format(build=machine.build)
    return _("without a GPU or MPS the CPU is the only device: choose an accelerator only when "
             "torch.cuda.is_available() or torch.backends.mps.is_available() says it is there.")


def _call_words(request: Any) -> str:
    return "choose_device()" if request is None else f"choose_device({request!r})"


def check_returns_device(choose_device: Callable[..., Any], machine: FakeMachine, request: Any = None) -> None:
    """``choose_device(request)`` (no argument when ``request`` is None) returns a ``torch.device``, not a string.

    The one verdict about the type: the others judge the device a string
    names, so returning strings costs this cell's points and no other's. A
    request that raises has no type to judge (refusing a device that is there
    is :func:`check_request`'s concern), so it passes here; the automatic
    choice always has an answer, so its raising fails.
    """
    where = _on_machine(_call_words(request), machine)
    args = () if request is None else (request,)
    try:
        chosen = _on(machine, choose_device, *args)
    except CheckFailed:
        raise
    except Exception as err:  # noqa: BLE001 - a refused request is the other cells' business
        if request is not None:
            return
        raise CheckFailed(_("{where} raised {kind}: {err} With no request there is always an answer (the CPU at "
                            "least): return a torch.device.").format(where=where, kind=type(err).__name__, err=err)
                          ) from None
    if isinstance(chosen, str):
        hint = _("return torch.device({chosen!r}), not the string {chosen!r}: a string works in .to({chosen!r}), but "
                 "code that reads device.type or device.index, or compares with a torch.device, breaks on it.").format(
            chosen=chosen)
        if request is not None:
            hint += " " + _("Turn the request into torch.device(requested) and return that.")
    else:
        hint = _("return a torch.device, e.g. torch.device('cpu').")
    check_type(chosen, torch.device, where, hint)


def check_automatic_choice(choose_device: Callable[..., Any], machine: FakeMachine, expected: str) -> None:
    """``choose_device()`` on ``machine`` chooses the device named ``expected``.

    A string is judged by the device it names (``torch.device(string)``):
    the type is :func:`check_returns_device`'s concern.
    """
    chosen = _as_device(_on(machine, choose_device))
    where = _on_machine("choose_device()", machine)
    check(_matches(chosen, expected), _("{where} returned {chosen!r}; expected torch.device({expected!r}). {hint}")
          .format(where=where, chosen=chosen, expected=expected, hint=_automatic_hint(machine, expected)))


def _request_hint(request: Any) -> str:
    if isinstance(request, torch.device):
        return _("accept a torch.device as well as a string.")
    if request == "cuda":
        return _("'cuda' names the current GPU: accept it whenever a GPU is there, even though "
                 "torch.device('cuda') != torch.device('cuda:0').")
    if torch.device(request).index is not None:
        return _("an explicit request wins, index included.")
    return _("an explicit request wins over the automatic choice.")


def check_request(choose_device: Callable[..., Any], machine: FakeMachine, request: Any, expected: str) -> None:
    """``choose_device(request)`` on a ``machine`` that has the device returns it (a string judged by its name)."""
    where = _on_machine(f"choose_device({request!r})", machine)
    try:
        chosen = _on(machine, choose_device, request)
    except CheckFailed:
        raise
    except Exception as err:  # noqa: BLE001 - refusing a device that is there is the mistake to name
        said = _("{where} raised {kind}: {err} This machine has that device, so the request wins.").format(
            where=where, kind=type(err).__name__, err=err)
        raise CheckFailed(said + (f" {_request_hint(request)}" if request == "cuda" else "")) from None
    chosen = _as_device(chosen)
    check(_matches(chosen, expected), _("{where} returned {chosen!r}; expected torch.device({expected!r}): {hint}")
          .format(where=where, chosen=chosen, expected=expected, hint=_request_hint(request)))


def check_refuses(choose_device: Callable[..., Any], machine: FakeMachine, request: Any) -> None:
    """``choose_device(request)`` on a ``machine`` without that device raises RuntimeError listing what it has."""
    where = _on_machine(f"choose_device({request!r})", machine)
    want = torch.device(request)
    if want.type == "cuda" and machine.cuda and want.index is not None and want.index >= machine.cuda:
        hint = _("a GPU index must be below torch.cuda.device_count(): raise RuntimeError.")
    else:
        hint = _("do not fall back silently (nor return a device that is not there): raise RuntimeError.")
    try:
        chosen = _on(machine, choose_device, request)
    except CheckFailed:
        raise
    except Exception as err:  # noqa: BLE001 - which error it is gets checked below
        error = err
    else:
        raise CheckFailed(_("{where} returned {chosen!r} instead of raising an error: {hint}").format(
            where=where, chosen=chosen, hint=hint))
    check(isinstance(error, RuntimeError), _("{where} raised {kind}: {err} The contract says RuntimeError (or a "
          "subclass): torch reports device problems as RuntimeError, so that is what callers catch. Raise "
          "RuntimeError(...) instead.").format(where=where, kind=type(error).__name__, err=error))
    check("cpu" in str(error), _("the error for a missing device said {said!r}; it should list what the machine has "
          "(at least 'cpu').").format(said=str(error)))


# --- move_batch --------------------------------------------------------------------------------------------------


def _move(move_batch: Callable[..., Any], batch: Any, device: Any) -> Any:
    """``move_batch(batch, device)``, with the two ways it can blow up on a string explained."""
    try:
        return solved(move_batch, batch, device)
    except RecursionError:
        raise CheckFailed(_("move_batch never stopped recursing on a batch with a string in it: a str is a "
                            "Sequence whose items are strings again, down to one-letter strings made of themselves. "
                            "Return strings as they are before recursing (or recurse only into list and tuple).")
                          ) from None
    except AttributeError as err:
        raise CheckFailed(_("move_batch raised AttributeError: {err}. Only tensors have .to(): leave strings, numbers "
                            "and None as they are.").format(err=err)) from None
    except TypeError as err:
        named = _named_tuple_in(batch)
        if named is None:
            raise
        raise CheckFailed(_("move_batch raised TypeError: {err}. The batch holds a named tuple ({name}), and a named "
                            "tuple is built from one argument per field, {name}(*values), not from one iterable as "
                            "tuple(values) is: rebuild it with type(batch)(*moved_values).").format(
            err=err, name=type(named).__name__)) from None


def _named_tuple_in(batch: Any) -> tuple | None:
    """The first named tuple anywhere in ``batch``, or None."""
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return batch
    for _key, child in _children(batch):
        found = _named_tuple_in(child)
        if found is not None:
            return found
    return None


def _on_device(value: Any, device: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == torch.device(device).type


def _where(value: Any) -> str:
    return str(value.device) if isinstance(value, torch.Tensor) else _("a {kind}, not a tensor").format(
        kind=type(value).__name__)


def _children(value: Any) -> Iterator[tuple[Any, Any]]:
    """(key, child) for the containers a batch is made of: dicts, lists, tuples."""
    if isinstance(value, dict):
        yield from value.items()
    elif isinstance(value, (list, tuple)):
        yield from enumerate(value)


def _tensor_paths(value: Any, keys: tuple = ()) -> Iterator[tuple[tuple, torch.Tensor]]:
    """(keys from the top, tensor) for every tensor of a batch, at any depth."""
    if isinstance(value, torch.Tensor):
        yield keys, value
    for key, child in _children(value):
        yield from _tensor_paths(child, (*keys, key))


def _is_on(path: str, value: Any) -> str:
    """Where a tensor the check expected on the device was left: "batch['x'] is on cpu"."""
    return _("{path} is on {where}").format(path=path, where=_where(value))


def _path(keys: tuple) -> str:
    return "batch" + "".join(f"[{key!r}]" for key in keys)


def _at(moved: Any, keys: tuple) -> Any:
    """What ``moved`` holds where the given batch had a tensor; fails when the structure lost that place."""
    value = moved
    for key in keys:
        try:
            value = value[key]
        except (KeyError, IndexError, TypeError):
            raise CheckFailed(_("move_batch's result has nothing at {path} (the batch given had a tensor there): "
                                "keep every key and item of the batch.").format(path=_path(keys))) from None
    return value


def check_moves_flat(move_batch: Callable[..., Any], batch: dict | list, device: Any) -> None:
    """A flat dict or list comes back the same kind, same keys, every tensor on ``device``, shape and dtype kept."""
    moved = _move(move_batch, batch, device)
    kind = type(batch).__name__
    check_type(moved, type(batch), _("move_batch of a {kind}").format(kind=kind),
               _("a {kind} must come back as a {kind}.").format(kind=kind))
    if isinstance(batch, dict):
        check_equal(sorted(moved), sorted(batch), _("the keys of the moved dict"))
    else:
        check_equal(len(moved), len(batch), _("the length of the moved {kind}").format(kind=kind))
    pairs = [(_path(keys), tensor, _at(moved, keys)) for keys, tensor in _tensor_paths(batch)]
    left = [_is_on(path, out) for path, _tensor, out in pairs if not _on_device(out, device)]
    check(not left, _("after move_batch(batch, {device!r}) {left}: call .to(device) on every tensor and keep the "
                      "result.").format(device=device, left=", ".join(left)))
    for path, tensor, out in pairs:
        check_equal(out.shape, tensor.shape, _("the shape of {path} after moving").format(path=path))
        check_equal(out.dtype, tensor.dtype, _("the dtype of {path} after moving").format(path=path),
                    _("move with .to(device) only: converting dtypes (.float(), dtype=...) breaks labels and "
                      "indices."))


def check_moves_nested(move_batch: Callable[..., Any], batch: Any, device: Any) -> None:
    """Every tensor of ``batch``, at any depth, is on ``device`` in the result, at the same place."""
    moved = _move(move_batch, batch, device)
    left = [_is_on(_path(keys), out) for keys, out in
            ((keys, _at(moved, keys)) for keys, _tensor in _tensor_paths(batch)) if not _on_device(out, device)]
    check(not left, _("tensors nested inside dicts, lists and tuples were not all moved ({left}): call move_batch "
                      "recursively on each value, into every dict, list and tuple.").format(left=", ".join(left)))


def _structure_mistake(given: Any, moved: Any, path: str) -> str | None:
    """How ``moved`` differs in kind from ``given`` at ``path`` and below (tensors: only that they stay tensors)."""
    if isinstance(given, torch.Tensor):
        if isinstance(moved, torch.Tensor):
            return None
        return _("the tensor at {path} came back as a {kind}.").format(path=path, kind=type(moved).__name__)
    if isinstance(given, tuple) and hasattr(given, "_fields"):
        if type(moved) is not type(given):
            return _("a named tuple ({path}) came back as {kind}; build it with type(batch)(*values) so it stays a "
                     "{name}.").format(path=path, kind=type(moved).__name__, name=type(given).__name__)
    elif isinstance(given, (list, tuple)) and type(moved) is not type(given):
        return _("{path} was a {given} and came back as a {kind}: keep tuples as tuples and lists as lists.").format(
            path=path, given=type(given).__name__, kind=type(moved).__name__)
    elif isinstance(given, dict) and not (isinstance(moved, dict) and moved.keys() == given.keys()):
        return _("{path} was a dict with keys {keys} and came back as {where}: keep dicts and their keys.").format(
            path=path, keys=list(given), where=_where(moved))
    elif isinstance(given, str) and moved != given:
        return _("the string {given!r} ({path}) came back as {moved!r}: a str is a Sequence, so code that rebuilds "
                 "every Sequence rebuilds strings too. Return strings as they are (or recurse only into list and "
                 "tuple).").format(given=given, path=path, moved=str(moved)[:60])
    elif not isinstance(given, (dict, list, tuple)) and (type(moved) is not type(given) or moved != given):
        return _("{path} ({given!r}) came back as {moved!r}: leave strings, numbers and None unchanged (do not call "
                 ".to on them).").format(path=path, given=given, moved=moved)
    if isinstance(given, (list, tuple)) and len(moved) != len(given):
        return _("{path} had {n} items and came back with {m}.").format(path=path, n=len(given), m=len(moved))
    for key, child in _children(given):
        found = _structure_mistake(child, moved[key], f"{path}[{key!r}]")
        if found:
            return found
    return None


def check_keeps_structure(move_batch: Callable[..., Any], batch: Any, device: Any) -> None:
    """Dicts, lists, tuples and named tuples keep their type; strings, numbers and None come back unchanged."""
    moved = _move(move_batch, batch, device)
    mistake = _structure_mistake(batch, moved, "batch")
    check(mistake is None, _("move_batch changed the batch's structure: {mistake}").format(mistake=mistake))


def _contents(batch: Any) -> list[tuple[str, Any, list[Any], torch.device | None]]:
    """Every container and tensor of ``batch``: its path, itself, what it holds, and (a tensor) its device."""
    found = []

    def walk(value: Any, path: str) -> None:
        found.append((path, value, [child for _key, child in _children(value)],
                      value.device if isinstance(value, torch.Tensor) else None))
        for key, child in _children(value):
            walk(child, f"{path}[{key!r}]")

    walk(batch, "batch")
    return found


def _same_objects(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def check_keeps_batch_alone(move_batch: Callable[..., Any], batch: Any, device: Any) -> None:
    """After ``move_batch(batch, device)`` the caller's ``batch`` holds the same objects, on the same devices."""
    before = _contents(batch)
    _move(move_batch, batch, device)
    changed = [path for path, value, items, where in before
               if (where is not None and value.device != where)
               or not _same_objects([child for _key, child in _children(value)], items)]
    devices = sorted({str(t.device) for _keys, t in _tensor_paths(batch)})
    check(not changed, _("after move_batch(batch, {device!r}) the caller's own batch changed at {places} (its tensors "
                         "are now on {devices}): move_batch changed the batch it was given. Build new dicts and lists "
                         "({{k: ... for k, v in batch.items()}}) instead of assigning into the old ones.").format(
        device=device, places=", ".join(changed), devices=devices))


# --- forward_on --------------------------------------------------------------------------------------------------


def _forward(forward_on: Callable[..., Any], model: nn.Module, x: Any, device: Any) -> Any:
    """``forward_on(model, x, device)``; the caller's grad mode is put back whatever it did.

    :func:`check_forward_records_nothing` is the one that reports a leaked grad mode.
    """
    before = torch.is_grad_enabled()
    try:
        return solved(forward_on, model, x, device)
    finally:
        torch.set_grad_enabled(before)


def check_forward_output(forward_on: Callable[..., Any], model: nn.Module, x: torch.Tensor, device: Any,
                         expected: torch.Tensor) -> None:
    """``forward_on(model, x, device)`` is ``expected`` (model(x)), a tensor on ``device``."""
    out = _forward(forward_on, model, x, device)
    check_type(out, torch.Tensor, _("forward_on's result"), _("return the model's output tensor."))
    check(_on_device(out, device), _("forward_on(model, x, {device!r}) returned a tensor on {where}: compute on the "
          "device you were given, never a device named in the code.").format(device=str(device), where=out.device))
    check_equal(out.shape, expected.shape, _("the shape of forward_on's output"))
    check_close(out.detach(), expected, _("forward_on's output against model(x)"),
                _("run the model on the input, nothing more."))


def check_forward_stays_on(forward_on: Callable[..., Any], model: nn.Module, x: torch.Tensor, device: Any) -> None:
    """The output of ``forward_on(model, x, device)`` is on ``device``: model and input moved, output left there."""
    try:
        out = _forward(forward_on, model, x, device)
    except NotImplementedError as err:  # what copying a meta tensor off the device raises
        check("meta" not in str(err), _("forward_on(model, x, {device!r}) computed on meta, then copied the output off "
              "the device ({err}): return the output where it was computed, without .cpu(), .tolist() or "
              ".numpy().").format(device=str(device), err=err))
        raise
    check_type(out, torch.Tensor, _("forward_on's result"), _("return the model's output tensor."))
    params = list(model.parameters())
    ran_there = bool(params) and all(_on_device(p, device) for p in params)
    if ran_there:
        fix = _("the model ran on {kind}, so the output was moved afterwards: return it where it was computed (no "
                ".cpu(), .to('cpu')).").format(kind=torch.device(device).type)
    else:
        fix = _("move both the model and the input to `device`.")
    check(_on_device(out, device), _("forward_on(model, x, {device!r}) returned a tensor on {where}; {fix}").format(
        device=device, where=out.device, fix=fix))


def check_forward_records_nothing(forward_on: Callable[..., Any], model: nn.Module, x: torch.Tensor,
                                  device: Any) -> None:
    """No graph recorded during the forward pass, gradients on again afterwards, parameters still trainable."""
    recorded: list[bool] = []  # a hook sees the output before any .detach()
    hook = model.register_forward_hook(lambda module, inputs, output: recorded.append(
        bool(getattr(output, "requires_grad", False))))
    before = torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    try:
        out = solved(forward_on, model, x, device)
        left_off = not torch.is_grad_enabled()
    finally:
        torch.set_grad_enabled(before)
        hook.remove()
    check(not left_off, _("after forward_on returned, gradient recording is switched off for the whole program "
          "(training later would learn nothing): use `with torch.no_grad():` (or inference_mode), which switches it "
          "back on when the block ends, instead of torch.set_grad_enabled(False) on its own."))
    check(not getattr(out, "requires_grad", False), _("forward_on's output requires grad, so autograd kept the whole "
          "graph in memory: compute under torch.no_grad() or torch.inference_mode()."))
    check(not any(recorded), _("during forward_on's forward pass autograd recorded the graph (and kept the "
          "activations in memory); calling .detach() on the output afterwards does not undo that: compute under "
          "torch.no_grad() or torch.inference_mode()."))
    check(all(p.requires_grad for p in model.parameters()), _("after forward_on the model's parameters have "
          "requires_grad=False, so the caller can no longer train it: leave the parameters alone and switch "
          "gradients off for the forward pass only, with torch.no_grad() or torch.inference_mode()."))


def check_forward_eval(forward_on: Callable[..., Any], model: nn.Module, x: torch.Tensor, device: Any) -> None:
    """Every module of ``model`` is in evaluation mode during the forward pass, so two calls agree."""
    modes: list[bool] = []  # was each module in training mode when the forward pass reached it?
    hooks = [m.register_forward_pre_hook(lambda module, inputs: modes.append(module.training))
             for m in model.modules()]
    try:
        first = _forward(forward_on, model, x, device)
        second = _forward(forward_on, model, x, device)
    finally:
        for hook in hooks:
            hook.remove()
    check(not any(modes), _("during forward_on the model was in training mode, so dropout changes every answer: "
          "call model.eval() before the forward pass."))
    check(torch.equal(first, second), _("two calls of forward_on on the same input gave different outputs: call "
          "model.eval() so dropout is off."))


def check_forward_parameterless(forward_on: Callable[..., Any], module: nn.Module, x: torch.Tensor, device: Any,
                                expected: torch.Tensor | None = None) -> None:
    """A module without parameters runs on ``device`` (the input moved there) and gives ``expected``."""
    seen: list[torch.device] = []  # where did the module see its input?
    hook = module.register_forward_pre_hook(lambda m, inputs: seen.append(inputs[0].device))
    out = None
    try:
        out = _forward(forward_on, module, x, device)
    except StopIteration:
        raise CheckFailed(_("forward_on({module}, x, {device!r}) raised StopIteration: a module without parameters "
                            "has no next(model.parameters()). Move the input to `device`, the argument you were "
                            "given.").format(module=module, device=device)) from None
    except NotImplementedError as err:  # the output copied off meta afterwards: check_forward_stays_on reports it
        if "meta" not in str(err):
            raise
    finally:
        hook.remove()
    want = torch.device(device).type
    check([d.type for d in seen] == [want], _("forward_on({module}, x, {device!r}) ran the module on an input on "
          "{seen}; expected {want}: move the input to `device`, the argument you were given.").format(
        module=module, device=device, seen=[str(d) for d in seen], want=want))
    if expected is not None:
        check_equal(out, expected, f"forward_on({module}, x, {device!r})")
