# solution: count-parameters
# fails: count-parameters-frozen count-parameters-shared
# says: frozen
# Typical mistake: frozen parameters (requires_grad=False) counted too.
def count_parameters(model):
    return sum(p.numel() for p in model.parameters())
