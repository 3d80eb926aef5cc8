# solution: train-quietly
# fails: train-quietly-nan
# says: without raising
# Typical mistake: the NaN test dropped with the syncs: a NaN loss goes unnoticed.
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
    return torch.stack(losses).tolist(), correct.item() / seen
