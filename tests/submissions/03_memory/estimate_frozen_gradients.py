# solution: estimate-memory
# fails: estimate-memory-gradients
# says: frozen
def training_memory(model, dtype):
    """Gives frozen parameters a gradient too."""
    itemsize = dtype.itemsize
    params = list(model.parameters())
    trainable = sum(p.numel() for p in params if p.requires_grad)
    total = sum(p.numel() for p in params)
    return {"parameters": total * itemsize, "gradients": total * itemsize, "adam_state": 2 * trainable * itemsize}
