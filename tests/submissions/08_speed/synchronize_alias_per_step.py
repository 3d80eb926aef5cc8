# solution: train-quietly
# fails: train-quietly-no-syncs
# says: synchronize inside its loop
# Typical mistake: a synchronize under another name, called in every step (a no-op where there is no GPU, a
# full wait for the queue on one).
def train_quietly(model, optimizer, batches):
    wait = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    losses, correct, seen = [], 0, 0
    for x, y in batches:
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        wait()
        losses.append(loss.detach())
        correct = correct + (logits.argmax(dim=1) == y).sum()
        seen += len(y)
    losses = torch.stack(losses)
    if torch.isnan(losses).any():
        raise FloatingPointError("a loss is NaN")
    return losses.tolist(), correct.item() / seen
