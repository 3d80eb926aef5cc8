# solution: amp-train-step
# fails: amp-train-step-returns
# says: float
# Typical mistake: the loss tensor is returned instead of a Python float.
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss
