# solution: step-flops-utilisation
# fails: step-flops-utilisation-count step-flops-utilisation-time
# says: percentage
# Typical mistake: the utilisation as a percentage.
def step_flops_utilisation(model, batch, seconds, peak):
    x, y = batch
    with FlopCounterMode(display=False) as counter:
        F.cross_entropy(model(x), y).backward()
    return 100 * counter.get_total_flops() / seconds / peak
