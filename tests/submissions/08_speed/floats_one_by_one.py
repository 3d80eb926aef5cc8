# solution: train-quietly
# fails: train-quietly-no-syncs
# says: one by one
# Typical mistake: the reads moved after the loop, but still one per batch ([float(l) for l in losses]).
def train_quietly(model, optimizer, batches):
    losses, correct, seen = [], 0, 0
    for x, y in batches:
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
        correct = correct + (logits.argmax(dim=1) == y).sum()
        seen += len(y)
    losses = [float(l) for l in losses]
    if any(l != l for l in losses):
        raise FloatingPointError("a loss is NaN")
    return losses, correct.item() / seen
