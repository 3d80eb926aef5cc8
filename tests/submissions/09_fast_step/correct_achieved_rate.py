# solution: step-flops-utilisation
# fails:
# says:
# Correct, written differently: the achieved FLOP/s first, the model's gradients cleared after counting.
def step_flops_utilisation(model, batch, seconds, peak):
    inputs, targets = batch
    counter = FlopCounterMode(display=False)
    with counter:
        logits = model(inputs)
        F.cross_entropy(logits, targets).backward()
    model.zero_grad(set_to_none=True)
    achieved = counter.get_total_flops() / seconds
    return achieved / peak
