# solution: count-parameters
# fails:
# says:
# Correct, written differently: each module's own parameters (recurse=False), torch.numel.
def count_parameters(model):
    total = 0
    for module in model.modules():
        for p in module.parameters(recurse=False):
            if p.requires_grad:
                total += torch.numel(p)
    return total
