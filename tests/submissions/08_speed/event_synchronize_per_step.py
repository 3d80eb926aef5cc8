# solution: train-quietly
# fails: train-quietly-no-syncs
# says: synchronize inside its loop
# Typical mistake: a CUDA event recorded and waited for in every step "to time it", where there is a GPU:
# end.synchronize() makes the host wait for everything queued before the event, in every step.
def train_quietly(model, optimizer, batches):
    losses, correct, seen = [], 0, 0
    for x, y in batches:
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        if x.device.type == "cuda":
            end = torch.cuda.Event()
            end.record(torch.cuda.current_stream(x.device))
            end.synchronize()
        losses.append(loss.detach())
        correct = correct + (logits.argmax(dim=1) == y).sum()
        seen += len(y)
    losses = torch.stack(losses)
    if torch.isnan(losses).any():
        raise FloatingPointError("a loss is NaN")
    return losses.tolist(), correct.item() / seen
