# solution: estimate-memory
# fails:
# says:
def training_memory(model, dtype):
    """Written differently: one pass over named parameters, bytes from a tensor of that dtype."""
    size = torch.tensor([], dtype=dtype).element_size()
    out = {"parameters": 0, "gradients": 0, "adam_state": 0}
    for _name, p in model.named_parameters():
        out["parameters"] += p.numel() * size
        if p.requires_grad:
            out["gradients"] += p.numel() * size
            out["adam_state"] += 2 * p.numel() * size
    return out
