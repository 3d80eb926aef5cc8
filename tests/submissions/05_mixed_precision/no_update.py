# solution: amp-train-step
# fails: amp-train-step-update amp-train-step-skip-inf
# says: scaler.update()
# Typical mistake: the scaler is never updated, so its scale never adapts (and a second step fails).
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    return loss.item()
