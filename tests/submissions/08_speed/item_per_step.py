# solution: train-quietly
# fails: train-quietly-no-syncs
# says: once per batch
# Typical mistake: loss.item() kept in the loop: the results are right, and every step waits for the GPU.
def train_quietly(model, optimizer, batches):
    losses, correct, seen = [], 0, 0
    for x, y in batches:
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        correct = correct + (logits.argmax(dim=1) == y).sum()
        seen += len(y)
    if any(l != l for l in losses):  # NaN is not equal to itself
        raise FloatingPointError("a loss is NaN")
    return losses, correct.item() / seen
