# solution: train-quietly
# fails: train-quietly-no-syncs
# says: GradScaler.step
# Typical mistake: a GradScaler added "for speed" with a plain optimizer: scaler.step reads its found-inf flags on
# the host in every step (a fused optimizer would avoid that read; float32 training needs no scaler at all).
def train_quietly(model, optimizer, batches):
    losses, correct, seen = [], 0, 0
    scaler = None
    for x, y in batches:
        scaler = scaler or torch.amp.GradScaler(x.device.type)
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.detach())
        correct = correct + (logits.argmax(dim=1) == y).sum()
        seen += len(y)
    losses = torch.stack(losses)
    if torch.isnan(losses).any():
        raise FloatingPointError("a loss is NaN")
    return losses.tolist(), correct.item() / seen
