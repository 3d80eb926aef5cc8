# solution: count-parameters
# fails: count-parameters-total count-parameters-frozen count-parameters-shared
# says: tensors
# Typical mistake: counting parameter tensors instead of their elements.
def count_parameters(model):
    return len([p for p in model.parameters() if p.requires_grad])
