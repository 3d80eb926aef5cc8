# solution: train-quietly
# fails:
# says:
# Correct, written differently: losses written into a preallocated tensor, a running tensor count, isfinite.
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
