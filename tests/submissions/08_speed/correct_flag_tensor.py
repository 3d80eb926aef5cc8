# solution: train-quietly
# fails:
# says:
# Correct, written differently: a NaN flag kept as a tensor in the loop, everything read in one go at the end.
def train_quietly(model, optimizer, batches):
    losses, hits, bad, seen = [], [], torch.tensor(False), 0
    for x, y in batches:
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        bad = bad | torch.isnan(loss)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
        hits.append((logits.argmax(dim=1) == y).sum())
        seen += len(y)
    if bad:
        raise FloatingPointError("a loss was NaN")
    summary = torch.cat([torch.stack(losses), torch.stack(hits).sum().reshape(1).float()]).tolist()
    return summary[:-1], summary[-1] / seen
