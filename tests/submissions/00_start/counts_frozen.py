# solution: count-parameters
# fails: count-parameters-frozen
# says: frozen
# Typical mistake: frozen parameters (requires_grad=False) counted too.
def count_parameters(model):
    return sum(p.numel() for p in model.parameters())
