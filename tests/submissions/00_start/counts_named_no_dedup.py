# solution: count-parameters
# fails: count-parameters-shared
# says: counts once
# Typical mistake: named_parameters(remove_duplicate=False) lists a shared (tied) parameter under
# each of its names, so it is counted twice.
def count_parameters(model):
    return sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False) if p.requires_grad)
