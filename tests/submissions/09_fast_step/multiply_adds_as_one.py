# solution: step-flops-utilisation
# fails: step-flops-utilisation-count step-flops-utilisation-time
# says: multiply-add was counted as one FLOP
# Typical mistake: the counter's FLOPs halved, as if a multiply-add were one operation.
def step_flops_utilisation(model, batch, seconds, peak):
    x, y = batch
    with FlopCounterMode(display=False) as counter:
        F.cross_entropy(model(x), y).backward()
    multiply_adds = counter.get_total_flops() // 2
    return multiply_adds / seconds / peak
