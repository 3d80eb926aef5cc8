# solution: fix-training-script
# fails: fix-script-nan
# says: clamp
# the symptom fix the task names: probabilities clamped away from 0, so log() stays finite; with huge logits the
# loss is capped at -log(eps) (about 28 instead of the true hundreds) and the worst samples get a zero gradient
def train_epoch(model, optimizer, batches, device):
    """One pass over ``batches`` (CPU, labels 1..C) on ``device``; returns the mean loss as a float."""
    model.to(device)
    model.train()
    total_loss = 0.0
    for x, y in batches:
        x, y = x.to(device), (y - 1).to(device)
        optimizer.zero_grad()
        probs = torch.softmax(model(x), dim=1).clamp_min(1e-12)
        loss = -torch.log(probs[torch.arange(len(y)), y]).mean()
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
    return total_loss / len(batches)


def evaluate(model, batches, device):
    """Accuracy of ``model`` on ``batches`` (labels 1..C), as a float, without recording gradients."""
    model.to(device)
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in batches:
            predicted = model(x.to(device)).argmax(dim=1) + 1
            correct += (predicted == y.to(device)).sum().item()
            total += len(y)
    return correct / total
