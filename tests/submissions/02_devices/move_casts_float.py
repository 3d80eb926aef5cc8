# solution: move-batch
# fails: move-batch-flat
# says: dtype
# Typical mistake: every tensor is converted to float32 on the way, labels and indices included.
def move_batch(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device, dtype=torch.float32)
    if isinstance(batch, dict):
        return {k: move_batch(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(move_batch(v, device) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_batch(v, device) for v in batch)
    return batch
