# solution: estimate-memory
# fails:
# says:
import copy


def training_memory(model, dtype):
    """Written differently: a copy of the model converted to dtype, then p.numel() * p.element_size()."""
    converted = copy.deepcopy(model).to(dtype)
    sizes = [(p.numel() * p.element_size(), p.requires_grad) for p in converted.parameters()]
    grads = sum(size for size, trainable in sizes if trainable)
    return {"parameters": sum(size for size, _ in sizes), "gradients": grads, "adam_state": grads * 2}
