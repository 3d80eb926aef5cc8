# solution: step-flops-utilisation
# fails:
# says:
# Correct, written differently: forward and backward counted in two blocks, summed per module, a tensor returned.
from torch.utils.flop_counter import FlopCounterMode as Counter


def step_flops_utilisation(model, batch, seconds, peak):
    x, y = batch
    with Counter(display=False) as forward:
        loss = F.cross_entropy(model(x), y, reduction="mean")
    with Counter(display=False) as backward:
        loss.backward()
    flops = sum(sum(ops.values()) for ops in (forward.get_flop_counts()["Global"], backward.get_flop_counts()["Global"]))
    return torch.tensor(flops / (seconds * peak), dtype=torch.float64)
