# solution: move-batch
# fails: move-batch-new
# says: changed the batch it was given
# Typical mistake: tensors are replaced inside the caller's dicts and lists instead of new ones.
def move_batch(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        for key, value in batch.items():
            batch[key] = move_batch(value, device)
        return batch
    if isinstance(batch, list):
        for i, value in enumerate(batch):
            batch[i] = move_batch(value, device)
        return batch
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(move_batch(v, device) for v in batch))
    if isinstance(batch, tuple):
        return tuple(move_batch(v, device) for v in batch)
    return batch
