# solution: train-quietly
# fails: train-quietly-no-syncs
# says: torch.tensor(..., device=
# Typical mistake: a per-step constant made with torch.tensor(..., device=...): Python data copied to the GPU with
# a blocking copy, which waits for the queue in every step.
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
        seen = seen + torch.tensor(len(y), device=x.device)
    losses = torch.stack(losses)
    if torch.isnan(losses).any():
        raise FloatingPointError("a loss is NaN")
    return losses.tolist(), correct.item() / seen.item()
