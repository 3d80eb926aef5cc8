# solution: step-flops-utilisation
# fails: step-flops-utilisation-count step-flops-utilisation-time
# says: per sample
# Typical mistake: the step's time divided by the batch size, as if `seconds` were per sample.
def step_flops_utilisation(model, batch, seconds, peak):
    x, y = batch
    with FlopCounterMode(display=False) as counter:
        F.cross_entropy(model(x), y).backward()
    per_sample = seconds / len(x)
    return counter.get_total_flops() / per_sample / peak
