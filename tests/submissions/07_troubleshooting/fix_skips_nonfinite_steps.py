# solution: fix-training-script
# fails: fix-script-nan
# says: skipping non-finite steps
# keeps log(softmax) and skips the steps whose loss is not finite: with huge logits every step is skipped and the
# mean divides by zero (the check names the skipping, not a bare ZeroDivisionError)
def train_epoch(model, optimizer, batches, device):
    """One pass over ``batches`` (CPU, labels 1..C) on ``device``; returns the mean loss as a float."""
    model.to(device)
    model.train()
    total_loss, steps = 0.0, 0
    for x, y in batches:
        x, y = x.to(device), (y - 1).to(device)
        optimizer.zero_grad()
        probs = torch.softmax(model(x), dim=1)
        loss = -torch.log(probs[torch.arange(len(y)), y]).mean()
        if not torch.isfinite(loss):
            continue
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
        steps += 1
    return total_loss / steps


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
