# solution: train-quietly
# fails: train-quietly-no-syncs
# says: synchronize inside its loop
# Typical mistake: a torch.cuda.synchronize() in every step, guarded so it runs only where there is a GPU: the
# CPU grader never calls it, but on a GPU each step waits for the whole queue.
def train_quietly(model, optimizer, batches):
    losses, correct, seen = [], 0, 0
    for x, y in batches:
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        if torch.cuda.is_available():
            torch.cuda.synchronize()  # "to be safe"
        losses.append(loss.detach())
        correct = correct + (logits.argmax(dim=1) == y).sum()
        seen += len(y)
    losses = torch.stack(losses)
    if torch.isnan(losses).any():
        raise FloatingPointError("a loss is NaN")
    return losses.tolist(), correct.item() / seen
