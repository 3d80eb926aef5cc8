# solution: move-batch
# fails: move-batch-types
# says: named tuple
# Typical mistake: a named tuple rebuilt like a plain tuple becomes a plain tuple.
def move_batch(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: move_batch(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple):
        return tuple(move_batch(v, device) for v in batch)
    if isinstance(batch, list):
        return [move_batch(v, device) for v in batch]
    return batch
