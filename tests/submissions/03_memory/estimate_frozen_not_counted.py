# solution: estimate-memory
# fails: estimate-memory-parameters
# says: frozen
def training_memory(model, dtype):
    """Counts only trainable parameters as parameters: a frozen layer still takes memory."""
    size = dtype.itemsize
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad) * size
    return {"parameters": trainable, "gradients": trainable, "adam_state": 2 * trainable}
