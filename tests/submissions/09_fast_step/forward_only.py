# solution: step-flops-utilisation
# fails: step-flops-utilisation-count step-flops-utilisation-time
# says: only the forward
# Typical mistake: the FLOPs of the forward alone, as if a step were its forward pass.
def step_flops_utilisation(model, batch, seconds, peak):
    x, y = batch
    with FlopCounterMode(display=False) as counter:
        model(x)
    return counter.get_total_flops() / seconds / peak
