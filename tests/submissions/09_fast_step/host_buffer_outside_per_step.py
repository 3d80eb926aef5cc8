# solution: fast-step
# fails: fast-step-no-syncs
# says: blocking copy to the host
# Typical mistake: the losses written into a buffer made outside the function, with no device: on a GPU each
# `LOSSES[i] = loss` is a blocking device-to-host copy, a sync in every step.
LOSSES = torch.zeros(1000)  # made once, outside the function: on the host


def fast_step(model, batches, lr=1e-2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    losses = []
    for i, (x, y) in enumerate(batches):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        LOSSES[i] = loss.detach()
    return LOSSES[:len(batches)].tolist()
