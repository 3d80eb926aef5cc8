# solution: train-quietly
# fails: train-quietly-results
# says: averaging per-batch
# Typical mistake: the mean of per-batch accuracies: wrong when the last batch is smaller.
def train_quietly(model, optimizer, batches):
    losses, accuracies = [], []
    for x, y in batches:
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
        accuracies.append((logits.argmax(dim=1) == y).float().mean())
    losses = torch.stack(losses)
    if torch.isnan(losses).any():
        raise FloatingPointError("a loss is NaN")
    return losses.tolist(), torch.stack(accuracies).mean().item()
