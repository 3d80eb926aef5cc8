# solution: count-parameters
# fails: count-parameters-total count-parameters-frozen count-parameters-shared
# says: more than once
# Typical mistake: parameters() called on every module of model.modules(), so nested layers are
# counted once per module that contains them.
def count_parameters(model):
    total = 0
    for module in model.modules():
        total += sum(p.numel() for p in module.parameters() if p.requires_grad)
    return total
