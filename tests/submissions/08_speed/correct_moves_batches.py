# solution: train-quietly
# fails:
# says:
# Correct, written differently: each batch moved to `device` in the loop (already there: nothing moves), the
# count started with torch.tensor(0, device=device) before the loop (one copy, not one per step), .to("cpu") after.
def train_quietly(model, optimizer, batches):
    losses, correct, seen = [], torch.tensor(0, device=device), 0
    for x, y in batches:
        x, y = x.to(device), y.to(device, non_blocking=True)
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
        correct = correct + (logits.argmax(dim=1) == y).sum()
        seen += len(y)
    on_host = torch.cat([torch.stack(losses), correct.reshape(1).float()]).to("cpu")
    if torch.isnan(on_host).any():  # on the host now: free
        raise FloatingPointError("a loss is NaN")
    values = on_host.tolist()
    return values[:-1], values[-1] / seen
