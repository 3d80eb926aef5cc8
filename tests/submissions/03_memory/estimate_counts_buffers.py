# solution: estimate-memory
# fails: estimate-memory-parameters
# says: state_dict
def training_memory(model, dtype):
    """Counts model.state_dict(): buffers are counted, and a shared weight twice."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {
        "parameters": sum(t.numel() for t in model.state_dict().values()) * itemsize,
        "gradients": trainable * itemsize,
        "adam_state": 2 * trainable * itemsize,
    }
