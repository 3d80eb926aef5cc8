# solution: train-quietly
# fails: train-quietly-nan
# says: FloatingPointError
# Typical mistake: the NaN test raises another error than the loop it replaces.
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
    losses = torch.stack(losses)
    if not torch.isfinite(losses).all():
        raise ValueError("a loss is not finite")
    return losses.tolist(), correct.item() / seen
