# solution: train-quietly
# fails:
# says:
# Correct, written differently: losses written into a buffer preallocated on the batches' device, a running tensor
# count there too, isfinite.
def train_quietly(model, optimizer, batches):
    batches = list(batches)
    where = batches[0][0].device
    losses = torch.empty(len(batches), device=where)
    correct = torch.zeros((), dtype=torch.long, device=where)
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
