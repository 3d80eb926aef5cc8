# solution: count-parameters
# fails: count-parameters-total
# says: p.numel() counts the elements of any shape
# Typical mistake: shape[0] * shape[1], with a special case for 1-d biases; a 0-d parameter has no
# shape[0] (IndexError), and a conv weight has two more dimensions.
def count_parameters(model):
    total = 0
    for p in model.parameters():
        if p.requires_grad:
            total += p.shape[0] * (p.shape[1] if p.dim() > 1 else 1)
    return total
