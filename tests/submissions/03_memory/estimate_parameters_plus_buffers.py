# solution: estimate-memory
# fails: estimate-memory-parameters
# says: buffers
def training_memory(model, dtype):
    """Adds model.buffers() to the parameters: BatchNorm's running statistics are not parameters."""
    size = dtype.itemsize
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad) * size
    everything = sum(p.numel() for p in model.parameters()) + sum(b.numel() for b in model.buffers())
    return {"parameters": everything * size, "gradients": trainable, "adam_state": 2 * trainable}
