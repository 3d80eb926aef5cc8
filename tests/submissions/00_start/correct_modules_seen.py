# solution: count-parameters
# fails:
# says:
# Correct, written differently: each module's own parameters (recurse=False), torch.numel, and a set
# of ids so that a parameter shared by two layers is counted once.
def count_parameters(model):
    seen, total = set(), 0
    for module in model.modules():
        for p in module.parameters(recurse=False):
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                total += torch.numel(p)
    return total
