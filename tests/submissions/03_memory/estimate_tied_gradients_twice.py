# solution: estimate-memory
# fails: estimate-memory-gradients estimate-memory-adam
# says: one .grad
def training_memory(model, dtype):
    """Counts the parameters right, but a shared weight's gradient and Adam state once per layer using it."""
    size = dtype.itemsize
    uses = [p for _, p in model.named_parameters(remove_duplicate=False) if p.requires_grad]
    trainable = sum(p.numel() for p in uses) * size
    return {"parameters": sum(p.numel() for p in model.parameters()) * size,
            "gradients": trainable, "adam_state": 2 * trainable}
