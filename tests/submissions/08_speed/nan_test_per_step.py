# solution: train-quietly
# fails: train-quietly-no-syncs
# says: `if t:`
# Typical mistake: the NaN test left in the loop: Python `if` on a tensor reads its value every step.
def train_quietly(model, optimizer, batches):
    losses, correct, seen = [], 0, 0
    for x, y in batches:
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        if torch.isnan(loss):
            raise FloatingPointError("the loss is NaN")
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
        correct = correct + (logits.argmax(dim=1) == y).sum()
        seen += len(y)
    return torch.stack(losses).tolist(), correct.item() / seen
