# solution: count-parameters
# fails:
# says:
# Correct, written differently: one flat vector of the trainable parameters.
def count_parameters(model):
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        return 0
    return torch.nn.utils.parameters_to_vector(params).numel()
