# solution: amp-train-step
# fails: amp-train-step-scaled-backward
# says: scaler.scale(loss).backward()
# Typical mistake: backward on the unscaled loss (small fp16 gradients underflow).
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    loss.backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
