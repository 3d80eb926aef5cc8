# solution: train-quietly
# fails: train-quietly-no-syncs
# says: dev.synchronize()
# Typical mistake: the course's own dev.synchronize(device) in every step, called through a helper of the
# learner's: it does nothing on a CPU, and on a GPU it waits for every queued kernel in every step.
def wait_for(where):
    dev.synchronize(where)


def train_quietly(model, optimizer, batches):
    losses, correct, seen = [], 0, 0
    for x, y in batches:
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        wait_for(x.device)
        losses.append(loss.detach())
        correct = correct + (logits.argmax(dim=1) == y).sum()
        seen += len(y)
    losses = torch.stack(losses)
    if torch.isnan(losses).any():
        raise FloatingPointError("a loss is NaN")
    return losses.tolist(), correct.item() / seen
