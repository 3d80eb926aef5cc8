# solution: train-quietly
# fails: train-quietly-no-syncs
# says: blocking copy to the host
# Typical mistake: a pinned-looking idea without the pinning or the non_blocking: each loss copy_'d into a slot of
# a host tensor, a blocking device-to-host copy in every step.
def train_quietly(model, optimizer, batches):
    batches = list(batches)
    losses, correct, seen = torch.zeros(len(batches)), 0, 0
    for i, (x, y) in enumerate(batches):
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        losses[i:i + 1].copy_(loss.detach().reshape(1))
        correct = correct + (logits.argmax(dim=1) == y).sum()
        seen += len(y)
    if torch.isnan(losses).any():
        raise FloatingPointError("a loss is NaN")
    return losses.tolist(), correct.item() / seen
