# solution: train-quietly
# fails: train-quietly-no-syncs
# says: blocking copy to the host
# Typical mistake: each loss copied to the host with .to("cpu") in the loop: a blocking device-to-host copy waits
# for the GPU as .item() does (on a CPU it moves nothing, which is why it looks free there).
def train_quietly(model, optimizer, batches):
    losses, correct, seen = [], 0, 0
    for x, y in batches:
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach().to("cpu"))
        correct = correct + (logits.argmax(dim=1) == y).sum()
        seen += len(y)
    losses = torch.stack(losses)
    if torch.isnan(losses).any():
        raise FloatingPointError("a loss is NaN")
    return losses.tolist(), correct.item() / seen
