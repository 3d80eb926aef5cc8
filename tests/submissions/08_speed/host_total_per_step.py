# solution: train-quietly
# fails: train-quietly-no-syncs
# says: on a GPU this raises
# Typical mistake: a running total made on the host, updated from each device loss: on a GPU `total += loss`
# raises (a CPU tensor cannot take a CUDA tensor's values in place).
def train_quietly(model, optimizer, batches):
    total = torch.zeros(())
    losses, correct, seen = [], 0, 0
    for x, y in batches:
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        total += loss.detach()
        losses.append(loss.detach())
        correct = correct + (logits.argmax(dim=1) == y).sum()
        seen += len(y)
    losses = torch.stack(losses)
    if torch.isnan(losses).any():
        raise FloatingPointError("a loss is NaN")
    return losses.tolist(), correct.item() / seen
