# solution: estimate-memory
# fails: estimate-memory-parameters estimate-memory-gradients estimate-memory-adam
# says: shared
def training_memory(model, dtype):
    """named_parameters(remove_duplicate=False): a shared weight is counted once per layer that uses it."""
    size = dtype.itemsize
    params = [p for _, p in model.named_parameters(remove_duplicate=False)]
    trainable = sum(p.numel() for p in params if p.requires_grad) * size
    return {"parameters": sum(p.numel() for p in params) * size, "gradients": trainable, "adam_state": 2 * trainable}
