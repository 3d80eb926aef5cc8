# solution: estimate-memory
# fails: estimate-memory-adam
# says: exp_avg_sq
def training_memory(model, dtype):
    """Counts only one state tensor per parameter for Adam."""
    itemsize = dtype.itemsize
    params = list(model.parameters())
    trainable = sum(p.numel() for p in params if p.requires_grad)
    return {"parameters": sum(p.numel() for p in params) * itemsize, "gradients": trainable * itemsize,
            "adam_state": trainable * itemsize}
