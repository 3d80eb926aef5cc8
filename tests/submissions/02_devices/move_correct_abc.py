# solution: move-batch
# fails:
# says:
# Correct, written differently: collections.abc Mapping and Sequence, strings excluded first.
from collections.abc import Mapping, Sequence


def move_batch(batch, device):
    if torch.is_tensor(batch):
        return batch.to(device=device)
    if isinstance(batch, (str, bytes)):
        return batch
    if isinstance(batch, Mapping):
        return type(batch)({k: move_batch(v, device) for k, v in batch.items()})
    if isinstance(batch, Sequence):
        items = [move_batch(v, device) for v in batch]
        if isinstance(batch, tuple) and hasattr(batch, "_fields"):
            return type(batch)(*items)
        return type(batch)(items)
    return batch
