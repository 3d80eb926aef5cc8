# solution: train-quietly
# fails: train-quietly-no-syncs
# says: blocking copy to the host
# Typical mistake: each loss copied with .to(torch.device("cpu")) in the loop: a blocking device-to-host copy per
# step, as .to("cpu") is (the CPU grader reads the spelling: the course's `device` is that same object here).
def train_quietly(model, optimizer, batches):
    losses, correct, seen = [], 0, 0
    for x, y in batches:
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach().to(torch.device("cpu")))
        correct = correct + (logits.argmax(dim=1) == y).sum()
        seen += len(y)
    losses = torch.stack(losses)
    if torch.isnan(losses).any():
        raise FloatingPointError("a loss is NaN")
    return losses.tolist(), correct.item() / seen
