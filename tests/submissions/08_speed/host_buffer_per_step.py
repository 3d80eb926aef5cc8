# solution: train-quietly
# fails: train-quietly-no-syncs
# says: host tensor
# Typical mistake: losses written into a buffer made on the host (torch.empty(n) names no device): on a GPU each
# `losses[i] = loss` is a blocking device-to-host copy, a sync in every step (and the CPU count cannot take a GPU sum).
def train_quietly(model, optimizer, batches):
    batches = list(batches)
    losses = torch.empty(len(batches))
    correct = torch.zeros((), dtype=torch.long)
    seen = 0
    for i, (x, y) in enumerate(batches):
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        losses[i] = loss.detach()
        correct += (logits.argmax(dim=1) == y).sum()
        seen += y.shape[0]
    if not bool(torch.isfinite(losses).all()):
        raise FloatingPointError("a loss is not finite")
    return losses.tolist(), float(correct) / seen
