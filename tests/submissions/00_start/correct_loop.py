# solution: count-parameters
# fails:
# says:
# Correct, written differently: an explicit loop over named parameters.
def count_parameters(model):
    total = 0
    for _name, param in model.named_parameters():
        if param.requires_grad:
            n = 1
            for size in param.shape:
                n *= size
            total += n
    return total
