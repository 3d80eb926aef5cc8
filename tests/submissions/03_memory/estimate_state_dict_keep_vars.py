# solution: estimate-memory
# fails:
# says:
def training_memory(model, dtype):
    """Written differently: state_dict(keep_vars=True), keeping Parameters only, each storage once."""
    seen, params = set(), []
    for tensor in model.state_dict(keep_vars=True).values():
        if isinstance(tensor, nn.Parameter) and id(tensor) not in seen:
            seen.add(id(tensor))
            params.append(tensor)
    size = dtype.itemsize
    grads = sum(p.nelement() for p in params if p.requires_grad) * size
    return {"parameters": sum(p.nelement() for p in params) * size, "gradients": grads, "adam_state": 2 * grads}
