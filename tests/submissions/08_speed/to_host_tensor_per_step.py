# solution: train-quietly
# fails: train-quietly-no-syncs
# says: blocking copy to the host
# Typical mistake: each loss converted "like" a host tensor with .to(other): other lives on the host (made with no
# device), so on a GPU every step is a blocking device-to-host copy.
def train_quietly(model, optimizer, batches):
    host = torch.zeros(())
    losses, correct, seen = [], 0, 0
    for x, y in batches:
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach().to(host))
        correct = correct + (logits.argmax(dim=1) == y).sum()
        seen += len(y)
    losses = torch.stack(losses)
    if torch.isnan(losses).any():
        raise FloatingPointError("a loss is NaN")
    return losses.tolist(), correct.item() / seen
