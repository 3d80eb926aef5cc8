# solution: move-batch
# fails:
# says:
# Correct, written differently: copy the container (dict(batch), list(batch)) then replace its items;
# sets handled too.
def move_batch(batch, device):
    if hasattr(batch, "to") and isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        out = dict(batch)
        for key in out:
            out[key] = move_batch(out[key], device)
        return out
    if isinstance(batch, list):
        out = list(batch)
        for i, value in enumerate(out):
            out[i] = move_batch(value, device)
        return out
    if isinstance(batch, set):
        return {move_batch(v, device) for v in batch}
    if isinstance(batch, tuple):
        moved = [move_batch(v, device) for v in batch]
        return batch._replace(**dict(zip(batch._fields, moved))) if hasattr(batch, "_replace") else tuple(moved)
    return batch
