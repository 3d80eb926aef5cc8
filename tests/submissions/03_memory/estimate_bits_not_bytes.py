# solution: estimate-memory
# fails: estimate-memory-parameters estimate-memory-gradients estimate-memory-adam
# says: bits
def training_memory(model, dtype):
    """Multiplies by torch.finfo(dtype).bits: bits, not bytes, 8 times too much."""
    size = torch.finfo(dtype).bits
    params = list(model.parameters())
    trainable = sum(p.numel() for p in params if p.requires_grad) * size
    return {"parameters": sum(p.numel() for p in params) * size, "gradients": trainable, "adam_state": 2 * trainable}
