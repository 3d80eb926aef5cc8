# solution: move-batch
# fails: move-batch-nested
# says: recursive
# Typical mistake: only the top level of the batch is moved.
def move_batch(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(v.to(device) if isinstance(v, torch.Tensor) else v for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(v.to(device) if isinstance(v, torch.Tensor) else v for v in batch)
    return batch
