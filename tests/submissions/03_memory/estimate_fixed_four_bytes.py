# solution: estimate-memory
# fails: estimate-memory-dtype
# says: dtype argument
def training_memory(model, dtype):
    """Assumes 4 bytes per element whatever the dtype."""
    params = list(model.parameters())
    trainable = sum(p.numel() for p in params if p.requires_grad)
    return {"parameters": sum(p.numel() for p in params) * 4, "gradients": trainable * 4, "adam_state": 2 * trainable * 4}
