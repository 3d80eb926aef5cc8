# solution: move-batch
# fails: move-batch-types
# says: a str is a Sequence
# Typical mistake: every collections.abc.Sequence rebuilt as a list or tuple, strings included: a
# one-letter string is a sequence of itself, so the recursion never ends.
from collections.abc import Mapping, Sequence


def move_batch(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, Mapping):
        return {k: move_batch(v, device) for k, v in batch.items()}
    if isinstance(batch, Sequence):
        moved = [move_batch(v, device) for v in batch]
        if isinstance(batch, tuple):
            return type(batch)(*moved) if hasattr(batch, "_fields") else tuple(moved)
        return moved
    return batch
