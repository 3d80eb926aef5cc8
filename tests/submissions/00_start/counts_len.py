# solution: count-parameters
# fails: count-parameters-total count-parameters-frozen count-parameters-shared
# says: len(p)
# Typical mistake: len(p) is the first dimension of a parameter, not its number of elements.
def count_parameters(model):
    return sum(len(p) for p in model.parameters() if p.requires_grad)
