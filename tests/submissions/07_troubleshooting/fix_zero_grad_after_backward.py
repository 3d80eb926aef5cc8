# solution: fix-training-script
# fails: fix-script-zero-grad fix-script-learns
# says: zero_grad
# zeroes between backward and step: the optimizer steps on zero gradients, nothing is learned
def train_epoch(model, optimizer, batches, device):
    """One pass over ``batches`` (CPU, labels 1..C) on ``device``; returns the mean loss as a float."""
    model.to(device)
    model.train()
    total_loss = 0.0
    for x, y in batches:
        x, y = x.to(device), (y - 1).to(device)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.zero_grad()
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
