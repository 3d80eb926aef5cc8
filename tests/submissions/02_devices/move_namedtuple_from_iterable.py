# solution: move-batch
# fails: move-batch-types move-batch-nested
# says: one argument per field
# Typical mistake (the one the task warns about): every tuple, named ones included, rebuilt with
# type(batch)(generator); a named tuple's constructor wants one argument per field, so it raises
# TypeError (missing positional argument).
def move_batch(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: move_batch(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_batch(v, device) for v in batch)
    return batch
