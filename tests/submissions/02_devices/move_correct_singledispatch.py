# solution: move-batch
# fails:
# says:
# Correct, written differently: functools.singledispatch, one function per type.
import functools


@functools.singledispatch
def _move(obj, device):
    return obj


@_move.register
def _(obj: torch.Tensor, device):
    return obj.to(device)


@_move.register
def _(obj: dict, device):
    return {k: _move(v, device) for k, v in obj.items()}


@_move.register
def _(obj: list, device):
    return [_move(v, device) for v in obj]


@_move.register
def _(obj: tuple, device):
    values = [_move(v, device) for v in obj]
    return type(obj)._make(values) if hasattr(obj, "_make") else tuple(values)


def move_batch(batch, device):
    return _move(batch, device)
