# solution: estimate-memory
# fails: estimate-memory-dtype
# says: dtype argument
def training_memory(model, dtype):
    """Uses the model's own dtype (p.element_size()) instead of the dtype asked for."""
    params = list(model.parameters())
    trainable = [p for p in params if p.requires_grad]
    return {
        "parameters": sum(p.numel() * p.element_size() for p in params),
        "gradients": sum(p.numel() * p.element_size() for p in trainable),
        "adam_state": 2 * sum(p.numel() * p.element_size() for p in trainable),
    }
