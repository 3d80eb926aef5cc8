# solution: estimate-memory
# fails:
# says:
def training_memory(model, dtype):
    """Written differently: bytes from torch.finfo(dtype).bits // 8, parameters deduplicated by id over modules()."""
    nbytes = torch.finfo(dtype).bits // 8
    unique = {}
    for module in model.modules():
        for p in module.parameters(recurse=False):
            unique[id(p)] = p
    total = sum(p.numel() for p in unique.values())
    trainable = sum(p.numel() for p in unique.values() if p.requires_grad)
    return dict(parameters=total * nbytes, gradients=trainable * nbytes, adam_state=2 * trainable * nbytes)
