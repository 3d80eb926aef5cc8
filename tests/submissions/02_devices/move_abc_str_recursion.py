# solution: move-batch
# fails: move-batch-types
# says: a str is a Sequence
# Typical mistake: recursing into every collections.abc.Sequence, strings included: a one-letter
# string is a sequence of itself, so the recursion never ends.
from collections.abc import Mapping, Sequence


def move_batch(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, Mapping):
        return {k: move_batch(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(move_batch(v, device) for v in batch))
    if isinstance(batch, Sequence):
        return type(batch)(move_batch(v, device) for v in batch)
    return batch
