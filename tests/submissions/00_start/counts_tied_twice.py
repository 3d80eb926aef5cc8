# solution: count-parameters
# fails: count-parameters-shared
# says: counts once
# Typical mistake: each module's own parameters (recurse=False) summed over model.modules(): a
# parameter shared by two layers (tied weights) is met, and counted, in both.
def count_parameters(model):
    total = 0
    for module in model.modules():
        for p in module.parameters(recurse=False):
            if p.requires_grad:
                total += torch.numel(p)
    return total
