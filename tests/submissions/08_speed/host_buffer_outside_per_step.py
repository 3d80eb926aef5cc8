# solution: train-quietly
# fails: train-quietly-no-syncs
# says: blocking copy to the host
# Typical mistake: the losses written into a buffer made outside the function, with no device: on a GPU each
# `LOSSES[i] = loss` is a blocking device-to-host copy, a sync in every step.
LOSSES = torch.zeros(1000)  # made once, outside the function: on the host


def train_quietly(model, optimizer, batches):
    losses, correct, seen = [], 0, 0
    for x, y in batches:
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        LOSSES[len(losses)] = loss.detach()
        losses.append(LOSSES[len(losses)])
        correct = correct + (logits.argmax(dim=1) == y).sum()
        seen += len(y)
    losses = torch.stack(losses)
    if torch.isnan(losses).any():
        raise FloatingPointError("a loss is NaN")
    return losses.tolist(), correct.item() / seen
