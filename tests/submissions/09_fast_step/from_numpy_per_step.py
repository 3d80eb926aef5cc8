# solution: fast-step
# fails: fast-step-no-syncs
# says: blocking copy of a host tensor to the device
# Typical mistake: a weight made from a NumPy array and moved to the device in every step: torch.from_numpy makes
# a host tensor, and .to(device) from it is a blocking host-to-device copy.
import numpy as np


def fast_step(model, batches, lr=1e-2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    losses = []
    for i, (x, y) in enumerate(batches):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach() * torch.from_numpy(np.ones((), dtype="float32")).to(x.device))
    return torch.stack(losses).tolist()
