# solution: train-quietly
# fails: 
# says: 
# Correct, written differently: the losses copied to the host once after the loop (.to("cpu")), then read one by
# one there, which waits for nothing.
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
        seen += len(y)
    on_host = torch.stack(losses).to("cpu")
    if torch.isnan(on_host).any():
        raise FloatingPointError("a loss is NaN")
    return [float(v) for v in on_host], correct.item() / seen
