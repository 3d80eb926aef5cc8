# solution: move-batch
# fails: move-batch-types
# says: AttributeError
# Typical mistake: .to() called on every leaf, strings and numbers included.
def move_batch(batch, device):
    if isinstance(batch, dict):
        return {k: move_batch(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(move_batch(v, device) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_batch(v, device) for v in batch)
    return batch.to(device)
